"""Sagas run end to end through PgBouncer in transaction pooling mode (issue 36).

Two worker processes and this test's client all reach PostgreSQL through one PgBouncer with
``pooler=transaction`` (no notifications: every process polls). 60 sagas, each with a
compensation, a durable timer and a signal, half of them declined: every one must end as its
signal says, the declined ones with their compensation run, and both workers must have run
some. Before the store's pooler mode this failed with ``relation "workflows" does not exist``
and ``prepared statement "_pg3_0" does not exist``.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import sagaway as sw
from tests.integration import pgbouncer_app

pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.timeout(180)]

SAGAS = 60
WORKERS = 2


def start_workers(url: str) -> list[subprocess.Popen[str]]:
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), *sys.path])}
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "tests.integration.pgbouncer_app", url],
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


def stop_workers(procs: list[subprocess.Popen[str]]) -> list[int | None]:
    for proc in procs:
        if proc.stdin is not None:
            proc.stdin.close()
    codes = []
    for proc in procs:
        try:
            codes.append(proc.wait(timeout=30))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            codes.append(None)
        if proc.stdout is not None:
            proc.stdout.close()
    return codes


async def _run_one(client: sw.Manager, n: int) -> tuple[str, str]:
    key = f"trip-{n}"
    handle = await client.workflow("trip", n).execute(idempotency_key=key)
    await client.signal("go").send(key, n % 2 == 0, dedupe_id=f"go-{n}")
    try:
        return "COMPLETED", await handle.result(timeout=120)
    except sw.CompletableError as exc:
        return "FAILED", str(exc)


async def test_sagas_with_timers_signals_and_compensations_through_pgbouncer(
    pgbouncer_url: str,
) -> None:
    client = pgbouncer_app.build(pgbouncer_url)
    async with client.connect():  # creates the schema, through the pooler
        pass
    procs = start_workers(pgbouncer_url)
    try:
        async with client.connect():
            began = time.monotonic()
            outcomes = await asyncio.gather(*(_run_one(client, n) for n in range(SAGAS)))
            took = time.monotonic() - began
            compensated = 0
            for n in range(SAGAS):
                described = await client.get_workflow(f"trip-{n}").describe()
                names = [step.name for step in described.steps]
                assert names[0] == "reserve", (n, names)
                if n % 2 == 1:
                    assert "release" in names and "book" not in names, (n, names)
                    compensated += 1
                else:
                    assert "book" in names and "release" not in names, (n, names)
    finally:
        codes = stop_workers(procs)
    expected = [("COMPLETED" if n % 2 == 0 else "FAILED") for n in range(SAGAS)]
    assert [status for status, _ in outcomes] == expected
    pids = set()
    for status, result in outcomes:
        if status == "COMPLETED":  # "booked seat-<n>@<pid of reserve> by <pid of book>"
            seat_at, _, booked_by = result.partition(" by ")
            pids |= {seat_at.rpartition("@")[2], booked_by}
    print(f"\n{SAGAS} sagas through PgBouncer in {took:.1f}s; workers seen: {len(pids)}")
    assert len(pids) == WORKERS, pids  # both workers ran sagas
    assert compensated == SAGAS // 2
    assert codes == [0] * WORKERS
