"""Regular traffic's throughput before and during a batch cancel (docs/batch.md, "Measured").

    python -m benchmarks.batch_under_load URL [JOBS] [RATE|none]

Creates JOBS "job" sagas (tests/integration/batch_scale_app.py), starts two worker processes
that run them (each job reserves, then sleeps an hour a round) and keep 8 "quick" workflows each
going as regular traffic, waits until the jobs sleep, then counts completed quick workflows
per second over 5 s, and again while ``batch_cancel`` of every job runs at RATE calls a second
(default 100; ``none``: unpaced). Counts come from the database (``ended_at``), so the URL must
be a SQLite or PostgreSQL one of a fresh database.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.integration import batch_scale_app
from tests.integration.test_batch_scale import stop_workers
from tests.store_helpers import raw_sql

import sagaway as sw

ROOT = Path(__file__).resolve().parents[1]
LANES = 8


def start(url: str, log_dir: Path) -> list[subprocess.Popen[str]]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), *sys.path])}
    command = [sys.executable, "-m", "tests.integration.batch_scale_app", url, str(log_dir)]
    procs = [
        subprocess.Popen(
            [*command, str(LANES)],
            cwd=ROOT,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    for proc in procs:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    return procs


def completed(url: str, start: float, end: float) -> int:
    query = (
        "SELECT count(*) FROM workflows WHERE status = 'COMPLETED' AND key LIKE 'load-%' "
        f"AND ended_at >= {start!r} AND ended_at < {end!r}"
    )
    return int(raw_sql(url, query)[0][0])


async def measure(url: str, jobs: int, rate: float | None) -> str:
    log_dir = Path(tempfile.mkdtemp(prefix="batch-load-"))
    client = batch_scale_app.build(url, log_dir)
    async with client.connect():
        for i in range(jobs):
            await client.workflow("job", f"job-{i}", i * 10 + 1).execute(idempotency_key=f"job-{i}")
    procs = start(url, log_dir)
    try:
        async with client.connect():
            await asyncio.sleep(8)  # every job has reserved and sleeps; the traffic is warm
            start_at = time.time()
            await asyncio.sleep(5)
            before = completed(url, start_at, time.time()) / (time.time() - start_at)
            start_at = time.time()
            report = await client.batch_cancel(sw.WorkflowFilter(name="job"), rate=rate)
            took = time.time() - start_at
            during = completed(url, start_at, time.time()) / took
    finally:
        stop_workers(procs)
    counts = {o.value: n for o, n in report.counts().items() if n}
    return (
        f"{url.partition(':')[0]} jobs={jobs} rate={rate}: batch {took:.1f} s {counts}; "
        f"traffic {before:.0f}/s before, {during:.0f}/s during ({during / before:.0%})"
    )


if __name__ == "__main__":
    jobs = int(sys.argv[2]) if len(sys.argv) > 2 else 1000
    given = sys.argv[3] if len(sys.argv) > 3 else "100"
    print(asyncio.run(measure(sys.argv[1], jobs, None if given == "none" else float(given))))
