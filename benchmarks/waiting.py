"""Many workflows WAITING at once: what they cost a worker, and how fast signals finish them.

    .venv/bin/python -m benchmarks.waiting [--n 10000] [--db sqlite|postgres] [--clients 1]

A client process starts N workflows that each wait for an `approval` signal; one worker process
(`sagaway worker benchmarks.waiting_app:manager`) runs them until they are all WAITING. The
worker's resident memory is read from /proc then (VmRSS) and at the end (VmHWM, the peak). The
client then sends the N signals and measures the time until all N are COMPLETED.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

import sagaway as sw

ROOT = Path(__file__).resolve().parents[1]


def _proc_kb(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


async def _count(manager: sw.Manager, status: sw.WorkflowStatus) -> int:
    try:
        return (await manager.count_workflows()).get(status, 0)
    except sw.SagawayError as exc:
        # A poll that found SQLite's write lock held past busy_timeout (a loaded machine): the
        # next poll asks again; failing would throw the whole run away.
        print(f"poll failed, polling again: {exc}", file=sys.stderr)
        return -1


async def _each(n: int, clients: int, call: Callable[[int], Awaitable[object]]) -> None:
    """``call(i)`` for i in range(n), ``clients`` at a time (1: one after another)."""
    queue = iter(range(n))

    async def client() -> None:
        for i in queue:
            await call(i)

    await asyncio.gather(*(client() for _ in range(clients)))


async def run(n: int, url: str, clients: int = 1) -> dict[str, float]:
    os.environ["BENCH_WAITING_DB_URL"] = url
    sys.path.insert(0, str(ROOT))
    from benchmarks import waiting_app

    manager = waiting_app.manager
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    async with manager.connect():
        t0 = time.perf_counter()
        await _each(
            n,
            clients,
            lambda i: manager.workflow(waiting_app.await_approval, i).execute(
                idempotency_key=f"w{i}"
            ),
        )
        started = time.perf_counter() - t0
        # Started once, outside any hot loop: blocking for a fork here is fine.
        worker = subprocess.Popen(  # noqa: ASYNC220
            [sys.executable, "-m", "sagaway", "worker", "benchmarks.waiting_app:manager"],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
        )
        try:
            t1 = time.perf_counter()
            # The worker is another process: its progress is only seen in the database.
            while await _count(manager, sw.WorkflowStatus.WAITING) < n:  # noqa: ASYNC110
                await asyncio.sleep(0.2)
            to_waiting = time.perf_counter() - t1
            await asyncio.sleep(1.0)  # let the worker settle before reading its memory
            rss_waiting = _proc_kb(worker.pid, "VmRSS") / 1024
            t2 = time.perf_counter()
            await _each(n, clients, lambda i: manager.signal("approval").send(f"w{i}", 1))
            sent = time.perf_counter() - t2
            while await _count(manager, sw.WorkflowStatus.COMPLETED) < n:  # noqa: ASYNC110
                await asyncio.sleep(0.1)
            to_completed = time.perf_counter() - t2
            peak = _proc_kb(worker.pid, "VmHWM") / 1024
        finally:
            worker.terminate()
            worker.wait(60)
    return {
        "n": n,
        "clients": clients,
        "start_s": round(started, 2),
        "all_waiting_s": round(to_waiting, 2),
        "worker_rss_while_waiting_mb": round(rss_waiting, 1),
        "signals_sent_s": round(sent, 2),
        "signal_to_all_completed_s": round(to_completed, 2),
        "worker_peak_rss_mb": round(peak, 1),
    }


def _drop_schema(base: str, schema: str) -> None:
    import psycopg
    from psycopg import sql

    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--db", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--json", metavar="PATH", help="also write the figures as JSON")
    parser.add_argument(
        "--clients",
        type=int,
        default=1,
        help="starts and signals sent at once by the client process (default 1: one by one)",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        if args.db == "sqlite":
            url = f"sqlite:///{tmp}/waiting.db"
        else:
            base = os.environ.get(
                "SAGAWAY_BENCH_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
            )
            schema = f"bench_wait_{uuid.uuid4().hex[:8]}"
            url = f"{base}?schema={schema}"
        try:
            result = asyncio.run(run(args.n, url, args.clients))
        finally:
            if args.db == "postgres":
                _drop_schema(base, schema)
    for key, value in result.items():
        print(f"{key:>30}: {value}")
    if args.json:
        Path(args.json).write_text(json.dumps({**result, "db": args.db}, indent=2) + "\n")


if __name__ == "__main__":
    main()
