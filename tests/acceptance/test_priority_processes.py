"""Priority across worker processes, with a worker killed by SIGKILL.

30 starts of mixed priority wait in the database; two `sagaway worker --concurrency 1`
processes take them higher level first, first in first out within a level; one worker is
killed mid-run (its workflow hangs in an activity): nothing is lost (its workflow is taken over
once its lease expires and every start completes) and the other worker keeps the order for the
rest."""

from __future__ import annotations

import asyncio
import random
import signal
from pathlib import Path

import pytest

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
