"""Acceptance: a batch cancel of 1,000 jobs while two worker processes run them. Every job
ends CANCELLED or COMPLETED; each cancelled job that had reserved is compensated exactly once
(and one that had not reserved, never), no completed job is compensated, and the batch's
report matches: a job it cancelled ended CANCELLED (or COMPLETED, had its last step been
under way), one it reports raced or did not select had COMPLETED on its own. A job whose
cancel came after its saga block closed ends CANCELLED without compensating (the engine's
rule for a cancel pending at the workflow's end): its history tells it apart."""

from __future__ import annotations

import asyncio
import collections
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import sagaway as sw
from tests.integration import batch_scale_app

pytestmark = [pytest.mark.slow, pytest.mark.long, pytest.mark.timeout(600)]

JOBS = 1000
WORKERS = 2
S = sw.WorkflowStatus
Out = sw.BatchOutcome


def start_workers(url: str, log_dir: Path) -> list[subprocess.Popen[str]]:
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), *sys.path])}
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "tests.integration.batch_scale_app", url, str(log_dir)],
            cwd=root,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(WORKERS)
    ]
    for proc in procs:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready"
    return procs


def stop_workers(procs: list[subprocess.Popen[str]]) -> None:
    for proc in procs:
        if proc.stdin is not None:
            proc.stdin.close()
    for proc in procs:
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


def lines(path: Path) -> collections.Counter[str]:
    return collections.Counter(path.read_text().split() if path.exists() else [])


async def all_ended(m: sw.Manager, timeout: float = 240.0) -> dict[str, S]:
    deadline = time.monotonic() + timeout
    while True:
        counts = await m.count_workflows()
        live = sum(n for s, n in counts.items() if s not in {S.CANCELLED, S.COMPLETED})
        if live == 0:
            break
        assert time.monotonic() < deadline, f"still live after {timeout}s: {counts}"
        await asyncio.sleep(0.2)
    final: dict[str, S] = {}
    after: str | None = None
    while page := await m.list_workflows(limit=500, after=after):
        final.update((d.key, d.status) for d in page)
        after = page[-1].cursor
    return final


async def histories(m: sw.Manager, key: str) -> list[str]:
    """A job's status and steps, for the message of a failed check."""
    d = await m.get_workflow(key).describe()
    steps = [f"{s.kind.value} {s.name} {s.status.value}" for s in d.steps]
    return [d.status.value, *steps]


AFTER_THE_SAGA = "cancel workflow end FAILED"
"""The last step of a job cancelled after its saga block closed: its three rounds done."""


async def test_batch_cancel_of_1000_jobs_while_workers_run_them(
    db_url: str, tmp_path: Path
) -> None:
    client = batch_scale_app.build(db_url, tmp_path)
    async with client.connect():  # creates the schema before the workers open it
        pass
    procs = start_workers(db_url, tmp_path)
    try:
        async with client.connect():
            for i in range(JOBS):
                await client.workflow("job", f"job-{i}", i).execute(idempotency_key=f"job-{i}")
            await asyncio.sleep(0.5)  # the workers have begun: some run, some wait, some done
            began = time.monotonic()
            report = await client.batch_cancel(
                sw.WorkflowFilter(name="job"), reason="provider down", rate=None
            )
            took = time.monotonic() - began
            final = await all_ended(client)
            again = await client.batch_cancel(sw.WorkflowFilter(name="job"))
            reserved, released = lines(tmp_path / "reserved"), lines(tmp_path / "released")
            # Compensated once if it had reserved and was cancelled; never if it completed.
            # Except a cancel that came after the saga block had closed (its last sleep over):
            # the workflow's end turns it into CANCELLED and, the saga having ended, undoes
            # nothing (docs/cancellation.md, "The workflow's end").
            odd = {
                key: await histories(client, key)
                for key, status in final.items()
                if released[key] != (reserved[key] if status is S.CANCELLED else 0)
            }
            late = {k for k, h in odd.items() if h[-1] == AFTER_THE_SAGA and len(h) == 9}
            wrong = {k: h for k, h in odd.items() if k not in late}
    finally:
        stop_workers(procs)

    counts = report.counts()
    shown = {o.value: n for o, n in counts.items() if n}
    print(f"\nbatch cancel of {JOBS} jobs: {took:.2f}s, {shown}, {len(late)} after their saga")
    assert len(final) == JOBS and set(final.values()) <= {S.CANCELLED, S.COMPLETED}
    assert max(reserved.values()) == 1 and max(released.values(), default=0) == 1
    assert not wrong, wrong
    outcome = {i.key: i.outcome for i in report.items}
    assert set(outcome.values()) <= {Out.DONE, Out.RACED}, counts
    for key, status in final.items():
        if outcome.get(key) is not Out.DONE:
            assert status is S.COMPLETED, (key, outcome.get(key))
    cancelled = sum(1 for s in final.values() if s is S.CANCELLED)
    assert counts[Out.DONE] >= cancelled >= 0.8 * JOBS, counts
    assert sum(released.values()) > 0.5 * JOBS  # most were cancelled mid-run, after reserving
    assert again.matched == 0  # nothing live is left: a second run selects nothing
