"""Priority across worker processes: 30 starts of mixed priority wait in the database; two
`sagaway worker --concurrency 1` processes take them higher level first, first in first out
within a level; one worker is killed with SIGKILL mid-run (its workflow hangs in an activity):
nothing is lost (its workflow is taken over once its lease expires and every start completes)
and the other worker keeps the order for the rest."""

from __future__ import annotations

import asyncio
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.long, pytest.mark.slow]  # starts real processes

ROOT = Path(__file__).resolve().parents[2]


def _worker(env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "sagaway",
            "worker",
            "--concurrency",
            "1",
            "tests.acceptance.priority_app:manager",
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


async def _until(check: object, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.05)


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
    env = {
        **os.environ,
        "PRIORITY_DB_URL": db_url,
        "PRIORITY_LOG": str(log),
        "PYTHONPATH": os.pathsep.join([str(ROOT), *sys.path]),
    }
    sys.path.insert(0, str(ROOT))
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
        workers = [_worker(env) for _ in range(2)]
        try:
            hang = Path(f"{log}.hang")
            await _until(lambda: hang.exists() and hang.read_text(), 60)
            victim = next(w for w in workers if str(w.pid) == hang.read_text())
            victim.send_signal(signal.SIGKILL)
            victim.wait(10)
            results = await asyncio.wait_for(
                asyncio.gather(*(h.result() for h in handles)), timeout=120
            )
        finally:
            for w in workers:
                if w.poll() is None:
                    w.send_signal(signal.SIGTERM)
            for w in workers:
                w.communicate(timeout=60)
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
