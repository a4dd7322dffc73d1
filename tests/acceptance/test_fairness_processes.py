"""Fairness across worker processes through a SIGKILL: 10,110 starts of three tenants, queued
in the worst order for first in, first out, taken in fair-queueing order.

The tenants queue 10,000 ("bulk"), then 100 ("mid"), then 10 ("few") starts of the trivial
workflow ``tick`` (priority_app; it appends ``<n> <pid>`` to a log as it begins). First in,
first out would run "few" after 10,100 others. Start-time fair queueing (docs/limits.md,
"How it works") gives each PENDING start a pass when it is created: the larger of its level's
oldest waiting pass and its tenant's last pass, plus 1/weight (1 here). Nothing is claimed while
they are queued, so the passes are exactly: "bulk" 1..10,000, "mid" 2..101, "few" 2..11, and a
claim takes them by pass, a tie to the earlier created (bulk, then mid, then few). The fair rank
of a start is its place in that order: "few" ends at rank 30, "mid" at 210.

What the test observes, and why each assertion is exact rather than a tolerance found by trial:

1. The passes. Before any worker runs, the test reads the stored pass of every start and
   requires exactly the model's passes, and the claim order they give (pass, then due time)
   to be the model's order. The starts are queued concurrently, ``BATCH`` at a time, so a group
   commit shares one insert among many; each start must still get a pass of its own. (They are
   queued by this one process, whose group commit writes one insert at a time. Inserts of
   several processes at once could read the same level minimum and tenant maximum and share a
   pass; that is not what this test queues.)

2. The claims, by ``WORKERS`` processes of concurrency 1. A worker claims at most its free
   slots, so each claim takes one start: the due start of lowest fair rank that no other claim
   holds (SQLite runs claims one after another; PostgreSQL's concurrent claims skip each other's
   locked rows), or, before any start, a started workflow whose lease expired (the hung one
   below: a second run, which the order checks leave out, reading each start's first line
   only). At concurrency 1 a worker logs a start before it claims the next, so its first lines
   are its claims in the order made:
   - each worker's starts rise strictly in fair rank (exact; no tolerance);
   - no start is logged early: when a start of fair rank r is logged, every start of lower rank
     has been claimed, and those of them not yet logged are each held by another worker's only
     slot, at most ``WORKERS - 1`` (the killed worker's is logged: it hangs after its line). So
     its place among the first lines is at least ``r - (WORKERS - 1)``: ``TOLERANCE`` is 2.
   Lateness has no such bound and none is asserted: a worker that claimed a start may wait any
   time (under load, descheduled) before it logs it, while the others run on. But the bound
   above limits it to a few starts at a time: the first k first lines are all of fair rank
   below k + ``WORKERS`` - 1, so at most ``WORKERS - 1`` of those ranks are missing from them:
   a start is late only while it is one of those few claimed and not yet logged. (A claim that
   ignored the pass would take "bulk" first, first in, first out: its start n, of fair rank
   about 3n, would be logged about 2n places early.)
   When all of "mid" and "few" have been logged, a worker of concurrency 100 joins to run the
   rest of "bulk" soon; from then on the order is not checked (only "bulk" is left), so the
   order assertions read the log as it was before it started. Every prefix of the log obeys
   them, so they are checked while the test waits too: a broken order fails at once.

3. Nothing lost, one run each. One worker hangs in a start once ``HANG_AFTER`` are logged and
   is killed (SIGKILL).
   That start is the only one run twice: the killed worker held nothing else (concurrency 1),
   so it is taken over once its lease expires and logged a second time by another worker. The
   lease is ``LEASE`` seconds here (the app's default, 2 s, lapsed under CI load), renewed
   every third of it, so a live worker would have to miss two renewals in a row, stalled 20 s
   or more, before another could take its start over: the log's repeats are exactly the hung
   start's. Every start ends COMPLETED, exactly once. The takeover comes ``LEASE`` after the
   kill, while the last worker runs "bulk": most of the test's time.
"""

from __future__ import annotations

import asyncio
import signal
import time
from collections import Counter
from pathlib import Path

import pytest

import sagaway as sw
from sagaway.states import WorkflowStatus
from sagaway.testing.internals import store_of
from tests.processes import app_env, process_of, running, until, worker

pytestmark = [pytest.mark.long, pytest.mark.slow]  # starts real processes

APP = "tests.acceptance.priority_app:manager"

TENANTS = {"bulk": 10_000, "mid": 100, "few": 10}
"""Starts per tenant, queued in this order and numbered 0..10,109 in that order."""
TOTAL = sum(TENANTS.values())
WORKERS = 3
"""Worker processes of concurrency 1 while the small tenants' starts are taken."""
TOLERANCE = WORKERS - 1
"""How many places before its fair rank a start may be logged (module docstring, 2)."""
HANG_AFTER = 20
"""The first start to find more lines than this in the log hangs (its worker is killed)."""
LEASE = 30.0
"""The workers' lease (seconds): renewed every 10 s, so no live worker's lapses."""
BATCH = 500
"""Starts queued at once (concurrently)."""


def _tenant(n: int) -> str:
    return "bulk" if n < TENANTS["bulk"] else "mid" if n < TOTAL - TENANTS["few"] else "few"


def _model_passes() -> list[float]:
    """Each start's pass by docs/limits.md's start-time fair queueing, as queued (none is
    claimed meanwhile, so a level's oldest waiting pass is that of start 0 throughout)."""
    last: dict[str, float] = {}
    passes: list[float] = []
    for n in range(TOTAL):
        tenant = _tenant(n)
        oldest = passes[0] if passes else 0.0
        passes.append(max(oldest, last.get(tenant, oldest)) + 1.0)
        last[tenant] = passes[-1]
    return passes


def _fair_order(passes: list[float]) -> list[int]:
    """The starts in the order a claim takes them: by pass, a tie to the earlier created."""
    return sorted(range(TOTAL), key=lambda n: (passes[n], n))


async def _queue(client: sw.Manager, tick: object) -> None:
    """The starts, tenant after tenant, ``BATCH`` at a time."""
    first = 0
    for tenant, count in TENANTS.items():
        numbers = range(first, first + count)
        for i in range(0, count, BATCH):
            await asyncio.gather(
                *(
                    client.workflow(tick, n).execute(  # type: ignore[call-overload]
                        idempotency_key=f"t-{n:05d}", fairness_key=tenant
                    )
                    for n in numbers[i : i + BATCH]
                )
            )
        first += count


def _log_lines(log: Path) -> list[tuple[int, int]]:
    """The log's complete lines, ``(n, pid)`` (a line being appended meanwhile is left out:
    each is one write of an O_APPEND file, so lines never mix)."""
    text = log.read_text() if log.exists() else ""
    return [
        (int(n), int(pid))
        for n, pid in (x.split() for x in text[: text.rfind("\n") + 1].splitlines())
    ]


def _firsts(lines: list[tuple[int, int]]) -> dict[int, int]:
    """Each start's first line: start -> the process that logged it, in log order."""
    firsts: dict[int, int] = {}
    for n, pid in lines:
        firsts.setdefault(n, pid)
    return firsts


def _small_tenants_logged(log: Path, rank: list[int]) -> bool:
    """True once every start of "mid" and "few" is logged; fails at once if the log so far
    breaks the claim order (what it checks holds for every prefix of the log)."""
    lines = _log_lines(log)
    _check_claim_order(lines, rank)
    return sum(1 for n in _firsts(lines) if n >= TENANTS["bulk"]) == TOTAL - TENANTS["bulk"]


async def _until_none_live(client: sw.Manager, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while await client.list_workflows(status=["PENDING", "RUNNING", "WAITING", "SUSPENDED"]):
        assert time.monotonic() < deadline, "workflows still live"
        await asyncio.sleep(0.2)


async def _check_passes(client: sw.Manager, passes: list[float], fair: list[int]) -> None:
    """The stored passes are the model's, and so is the claim order they give."""
    records = await store_of(client).list_workflows(status=WorkflowStatus.PENDING, limit=2 * TOTAL)
    by_n = {int(r.key[2:]): r for r in records}
    assert len(records) == TOTAL and sorted(by_n) == list(range(TOTAL))
    stored = [by_n[n].fair_pass for n in range(TOTAL)]
    wrong = [(n, stored[n], passes[n]) for n in range(TOTAL) if stored[n] != passes[n]]
    assert not wrong, wrong[:20]
    due = sorted(by_n.values(), key=lambda r: (r.fair_pass, r.next_run_at, r.run_id))
    assert [int(r.key[2:]) for r in due] == fair


def _check_claim_order(lines: list[tuple[int, int]], rank: list[int]) -> None:
    """Module docstring, 2: per worker rising fair ranks, and no start logged early."""
    firsts = _firsts(lines)
    for pid in set(firsts.values()):
        ranks = [rank[n] for n, by in firsts.items() if by == pid]
        assert ranks == sorted(set(ranks)), (pid, ranks)
    early = [(place, n, rank[n]) for place, n in enumerate(firsts) if rank[n] > place + TOLERANCE]
    assert not early, early


@pytest.mark.sql_only  # the order is the claim's SQL; the server passes the options through
@pytest.mark.timeout(600)  # about a minute; the lease alone is half a minute, and CI is loaded
async def test_tenants_share_workers_fairly_through_a_kill(db_url: str, tmp_path: Path) -> None:
    log = tmp_path / "log"
    env = app_env(
        PRIORITY_DB_URL=db_url,
        PRIORITY_LOG=str(log),
        PRIORITY_HANG_AFTER=str(HANG_AFTER),
        PRIORITY_LEASE=str(LEASE),
    )
    from tests.acceptance import priority_app

    passes = _model_passes()
    fair = _fair_order(passes)
    rank = [0] * TOTAL
    for place, n in enumerate(fair):
        rank[n] = place
    assert max(rank[n] for n in range(TOTAL - 10, TOTAL)) == 30  # "few": 31 claims, not 10,110
    assert max(rank[n] for n in range(TENANTS["bulk"], TOTAL - 10)) == 210

    client = priority_app.manager
    client.url = db_url
    began = time.monotonic()
    async with client.connect():
        await _queue(client, priority_app.tick)
        await _check_passes(client, passes, fair)
        queued = time.monotonic()
        with running(*(worker(env, APP, concurrency=1) for _ in range(WORKERS))) as workers:
            hang = Path(f"{log}.hang")
            await until(lambda: hang.exists() and hang.read_text(), 60)
            victim = process_of(workers, hang)
            victim.send_signal(signal.SIGKILL)
            victim.wait(10)
            await until(lambda: _small_tenants_logged(log, rank), 120)
            small = time.monotonic()
            before_finisher = _log_lines(log)
            workers.append(worker(env, APP, concurrency=100))
            await until(lambda: len(_firsts(_log_lines(log))) == TOTAL, 300, every=0.5)
            await _until_none_live(client, 2 * LEASE + 60)
            done = await client.list_workflows(status="COMPLETED", limit=2 * TOTAL)
    ran = time.monotonic()
    print(f"queued {queued - began:.1f} s, small {small - queued:.1f} s, rest {ran - small:.1f} s")

    _check_claim_order(before_finisher, rank)
    # Nothing lost: every start COMPLETED, once.
    assert sorted(d.key for d in done) == [f"t-{n:05d}" for n in range(TOTAL)]
    lines = _log_lines(log)
    hung = [n for n, pid in before_finisher if pid == victim.pid][-1]  # its last: it hung there
    counts = Counter(n for n, _ in lines)
    # One run each, but the hung start's: by the killed worker, then taken over by another.
    assert {n for n, count in counts.items() if count != 1} == {hung}
    assert [pid == victim.pid for n, pid in lines if n == hung] == [True, False]
