"""Cluster-wide queue limits hold across processes: three `sagaway worker` processes on one
database run activities of a queue limited to 5 at once and 20 starts per second in total.

Each process logs every attempt's start and end (its own file). Concurrency is checked exactly:
an attempt's slot is taken before its start is read and given back after its end is read, so
the logged intervals lie inside the slots. The rate is checked with a tolerance of 100 ms for
the time between an attempt's admission (when the database spaces starts 50 ms apart) and the
moment its start is read: 21 starts then span at least 0.9 s, so no window of 0.9 s may hold
more than 20 of them.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

N = 60
ROOT = Path(__file__).resolve().parents[2]


def _worker(env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "sagaway", "worker", "tests.acceptance.limits_app:manager"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def _seconds(i: int) -> float:
    """Every third attempt is long: both limits are reached (5 long ones fill the slots; the
    short ones, spaced by the rate alone, would start faster than 20 per second)."""
    return 0.6 if i % 3 == 0 else 0.05


def _intervals(folder: Path) -> list[tuple[float, float, str, str]]:
    out = []
    for path in folder.glob("*.log"):
        for line in path.read_text().splitlines():
            start, end, key = line.split()
            out.append((float(start), float(end), key, path.stem))
    return out


def max_concurrency(intervals: list[tuple[float, float]]) -> int:
    """The most intervals open at once (an end at the instant of a start closes first)."""
    events = sorted([(s, 1) for s, _ in intervals] + [(e, -1) for _, e in intervals])
    running = peak = 0
    for _, change in events:
        running += change
        peak = max(peak, running)
    return peak


def max_starts_within(starts: list[float], window: float) -> int:
    """The most starts in any half-open window ``[t, t + window)``."""
    starts = sorted(starts)
    peak = j = 0
    for i, t in enumerate(starts):
        while j < len(starts) and starts[j] < t + window:
            j += 1
        peak = max(peak, j - i)
    return peak


@pytest.mark.slow
@pytest.mark.long
async def test_three_workers_share_one_limit(db_url: str, tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    env = {
        **os.environ,
        "LIMITS_DB_URL": db_url,
        "LIMITS_LOG_DIR": str(logs),
        "PYTHONPATH": os.pathsep.join([str(ROOT), *sys.path]),
    }
    sys.path.insert(0, str(ROOT))
    from tests.acceptance import limits_app

    client = limits_app.manager  # the fourth process's role: start and watch, no workers
    client.url = db_url
    async with client.connect():
        workers = [_worker(env) for _ in range(3)]
        try:
            handles = [
                await client.workflow(limits_app.request, f"r-{i}", _seconds(i)).execute(
                    idempotency_key=f"r-{i}"
                )
                for i in range(N)
            ]
            results = await asyncio.wait_for(
                asyncio.gather(*(h.result() for h in handles)), timeout=60
            )
        finally:
            for w in workers:
                if w.poll() is None:
                    w.send_signal(signal.SIGTERM)
            errs = [w.communicate(timeout=60)[1] for w in workers]
    assert all(w.returncode == 0 for w in workers), errs
    assert sorted(results) == sorted(f"r-{i}" for i in range(N))
    intervals = _intervals(logs)
    assert sorted(key for *_, key, _ in intervals) == sorted(f"r-{i}" for i in range(N))
    assert len({pid for *_, pid in intervals}) >= 2, "the work was not spread over processes"
    peak = max_concurrency([(s, e) for s, e, *_ in intervals])
    assert 2 <= peak <= limits_app.CONCURRENCY
    assert max_starts_within([s for s, *_ in intervals], 0.9) <= limits_app.RATE
