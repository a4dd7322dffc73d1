"""Priority and fairness across worker processes, each with a worker killed by SIGKILL.

Priority: 30 starts of mixed priority wait in the database; two `sagaway worker --concurrency
1` processes take them higher level first, first in first out within a level; one worker is
killed mid-run (its workflow hangs in an activity): nothing is lost (its workflow is taken over
once its lease expires and every start completes) and the other worker keeps the order for the
rest.

Fairness: 10,000 starts of three tenants queued in the worst order for first in, first out,
taken by two `sagaway worker --concurrency 2` processes, one killed partway: the small
tenants' ranks are those of fair queueing within a stated tolerance, and every start runs
once (twice only where the killed process had begun it)."""

from __future__ import annotations

import asyncio
import random
import signal
import time
from collections import Counter
from pathlib import Path

import pytest

import sagaway as sw
from tests.processes import app_env, process_of, running, until, worker

pytestmark = [pytest.mark.long, pytest.mark.slow]  # starts real processes

APP = "tests.acceptance.priority_app:manager"


def _displaced(order: list[int], rank: dict[int, int]) -> int:
    """How far the claims stray from the expected order: the largest distance in ``order``
    between two starts taken the wrong way round."""
    worst = 0
    for i, a in enumerate(order):
        for j in range(i + 1, len(order)):
            if rank[a] > rank[order[j]]:
                worst = max(worst, j - i)
    return worst


async def test_workers_take_starts_by_priority_and_survive_a_kill(
    db_url: str, tmp_path: Path
) -> None:
    log = tmp_path / "log"
    env = app_env(PRIORITY_DB_URL=db_url, PRIORITY_LOG=str(log))
    from tests.acceptance import priority_app

    rng = random.Random(7)
    levels = [rng.randint(1, 5) for _ in range(30)]
    client = priority_app.manager
    client.url = db_url
    async with client.connect():
        handles = [
            await client.workflow(priority_app.job, n).execute(
                idempotency_key=f"job-{n:02d}", priority=level
            )
            for n, level in enumerate(levels)
        ]
        with running(*(worker(env, APP, concurrency=1) for _ in range(2))) as workers:
            hang = Path(f"{log}.hang")
            await until(lambda: hang.exists() and hang.read_text(), 60)
            victim = process_of(workers, hang)
            victim.send_signal(signal.SIGKILL)
            victim.wait(10)
            results = await asyncio.wait_for(
                asyncio.gather(*(h.result() for h in handles)), timeout=120
            )
    assert results == list(range(30))  # nothing lost
    lines = [line.split() for line in log.read_text().splitlines()]
    first = list(dict.fromkeys(int(n) for n, _ in lines))
    assert sorted(first) == list(range(30))
    hung = int(lines[priority_app.HANG_AFTER][0])
    assert [int(n) for n, _ in lines].count(hung) == 2  # taken over, run again
    rank = {n: r for r, n in enumerate(sorted(range(30), key=lambda n: (-levels[n], n)))}
    rest = [n for n in first if n != hung]
    # Two workers claim at once: one may log its start a little after the other's later one.
    assert _displaced(rest, rank) <= 2, [(n, levels[n]) for n in first]
    survivor = next(w for w in workers if w is not victim)
    after_kill = [int(n) for n, pid in lines[priority_app.HANG_AFTER + 1 :] if n != str(hung)]
    assert all(pid == str(survivor.pid) for _, pid in lines[priority_app.HANG_AFTER + 1 :])
    # The survivor alone: exactly in order.
    assert after_kill == sorted(after_kill, key=lambda n: rank[n])


TENANTS = {"bulk": 9_890, "mid": 100, "few": 10}
"""Starts per tenant, queued in this order (the worst for first in, first out: "few" would
wait behind 9,990 others); 10,000 in all, numbered 0..9,999 in that order."""
SLOTS = 2
"""Each of the two workers' concurrency."""
TOLERANCE = 2 * 2 * SLOTS
"""How far from its expected rank a small tenant's start may run: the two workers claim at
once, each up to its free slots, and log their starts in either order, so a start may pass or
fall behind at most the others in flight, twice over (8)."""


def _tenant(n: int) -> str:
    return "bulk" if n < TENANTS["bulk"] else "mid" if n < 10_000 - TENANTS["few"] else "few"


def _fair_order() -> list[str]:
    """The tenants of the claims in turn, by docs/limits.md's start-time fair queueing: each
    start's pass is the larger of its level's oldest waiting pass and its key's last pass, plus
    1/weight (weights are 1 here); claims go by pass, ties to the earlier start."""
    last: dict[str, float] = {}
    passes: list[tuple[float, int, str]] = []
    for n in range(10_000):
        tenant = _tenant(n)
        oldest = passes[0][0] if passes else 0.0  # nothing is claimed while they are queued
        passes.append((max(oldest, last.get(tenant, oldest)) + 1.0, n, tenant))
        last[tenant] = passes[-1][0]
    return [tenant for _, _, tenant in sorted(passes)]


def _ranks(tenants: list[str], name: str) -> list[int]:
    """The ranks of one tenant's starts, in turn."""
    return [rank for rank, tenant in enumerate(tenants) if tenant == name]


async def _queue(client: sw.Manager, tick: object) -> None:
    """The 10,000 starts, tenant after tenant, 250 at a time (concurrent starts share an
    insert on PostgreSQL; each still gets a pass of its own)."""
    first = 0
    for tenant, count in TENANTS.items():
        numbers = range(first, first + count)
        for i in range(0, count, 250):
            await asyncio.gather(
                *(
                    client.workflow(tick, n).execute(  # type: ignore[call-overload]
                        idempotency_key=f"t-{n:05d}", fairness_key=tenant
                    )
                    for n in numbers[i : i + 250]
                )
            )
        first += count


def _log_lines(log: Path) -> list[tuple[int, str]]:
    return [(int(n), pid) for n, pid in (line.split() for line in log.read_text().splitlines())]


def _small_tenants_logged(log: Path) -> bool:
    small = TENANTS["mid"] + TENANTS["few"]
    return len({n for n, _ in _log_lines(log) if n >= TENANTS["bulk"]}) == small


@pytest.mark.sql_only  # the order is the claim's SQL; the server passes the options through
async def test_tenants_share_workers_fairly_through_a_kill(db_url: str, tmp_path: Path) -> None:
    """The two workers take the small tenants' starts where fair queueing puts them, within
    ``TOLERANCE``: "few" within its first 31 claims, "mid" within 211, although first in, first
    out would run them after the 9,890 of "bulk". One worker is killed (SIGKILL) at the 21st
    start, which hangs. Once every start of the small tenants has run, a third worker
    (concurrency 100) joins to run the rest of "bulk" quickly: the order among one tenant's
    starts is not what this test checks, and with two slots per worker the rest would take
    minutes on PostgreSQL (a claim there sorts every due row). Every start completes; a start
    ran twice only if the killed worker had begun it (the hung one among them)."""
    log = tmp_path / "log"
    env = app_env(PRIORITY_DB_URL=db_url, PRIORITY_LOG=str(log), PRIORITY_HANG_AFTER="20")
    from tests.acceptance import priority_app

    client = priority_app.manager
    client.url = db_url
    began = time.monotonic()
    async with client.connect():
        await _queue(client, priority_app.tick)
        queued = time.monotonic()
        with running(*(worker(env, APP, concurrency=SLOTS) for _ in range(2))) as workers:
            hang = Path(f"{log}.hang")
            await until(lambda: hang.exists() and hang.read_text(), 60)
            victim = process_of(workers, hang)
            victim.send_signal(signal.SIGKILL)
            victim.wait(10)
            await until(lambda: _small_tenants_logged(log), 120)
            small = time.monotonic()
            workers.append(worker(env, APP, concurrency=100))
            await until(lambda: len({n for n, _ in _log_lines(log)}) == 10_000, 300, every=0.5)
            await _until_none_live(client)
            done = await client.list_workflows(status="COMPLETED", limit=20_000)
    ran = time.monotonic()
    print(f"queued {queued - began:.1f} s, small {small - queued:.1f} s, rest {ran - small:.1f} s")
    assert len(done) == 10_000 and len({d.key for d in done}) == 10_000  # nothing lost
    lines = _log_lines(log)
    hung = lines[20][0]
    counts = Counter(n for n, _ in lines)
    again = {n for n, count in counts.items() if count > 1}
    assert hung in again and max(counts.values()) == 2
    # Run twice: only what the killed worker had begun, then taken over by another.
    first_by = {n: pid for n, pid in reversed(lines)}
    assert all(first_by[n] == str(victim.pid) for n in again) and len(again) <= SLOTS
    order = [_tenant(n) for n in dict.fromkeys(n for n, _ in lines)]
    fair = _fair_order()
    # The killed worker's other slot may have held a start it had claimed but not yet logged:
    # that one runs once its lease expires, after the rest (the same stop's first clean-clone
    # CI saw it, one "mid" start last). At most SLOTS - 1 such, and never early.
    held = []
    for tenant in ("few", "mid"):
        observed, expected = _ranks(order, tenant), _ranks(fair, tenant)
        pairs = list(zip(observed, expected, strict=True))
        off = [(r, e) for r, e in pairs if abs(r - e) > TOLERANCE]
        assert all(r > e for r, e in off), (tenant, pairs)
        held += off
    assert len(held) <= SLOTS - 1, held
    assert _ranks(fair, "few")[-1] == 30 and _ranks(fair, "mid")[-1] == 210


async def _until_none_live(client: sw.Manager) -> None:
    deadline = time.monotonic() + 120
    while await client.list_workflows(status=["PENDING", "RUNNING", "WAITING", "SUSPENDED"]):
        assert time.monotonic() < deadline, "workflows still live"
        await asyncio.sleep(0.2)
