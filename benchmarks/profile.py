"""Profile Sagaway's hot path on the order-saga workload, in this process.

``python -m benchmarks.profile [--db sqlite|postgres] [--scenario A_thr] [--n N] [--clients C]
[--activities async|sync] [--engine sagaway|checkpoint|none]``
runs one scenario of ``benchmarks/WORKLOAD.md`` (20 warm-up workflows, then N measured) with
the engine, the client and the activities in this one process, and prints throughput, p50
latency and the CPU this process spent per workflow (user and system, all threads). Options:

* ``--engine checkpoint`` or ``none``: the same client loop over minimal hand-written
  checkpointing or the side effects alone (``benchmarks.baselines``), to compare costs with the
  same measurement (only ``--cprofile`` applies to them);
* ``--telemetry``: Sagaway's metrics and tracing on (``benchmarks.sagaway_telemetry``);
* ``--trace``: also count the Store calls and their mean latency (what the engine asked the
  database for, per workflow);
* ``--cprofile PATH``: run the measured part under cProfile, write the stats to PATH and print the
  functions with the most own time (main thread only);
* ``--preload N`` (SQLite): the engine database starts as a copy of one holding N ended
  workflows (``benchmarks.preload``; made once and kept in the system's temporary directory);
* ``--batches`` (SQLite): the durations of the writer thread's transactions (p50, p99, max, and
  how many took over 100 ms), to see stalls;
* ``--server``: the engine database behind a ``sagaway server`` process (the Manager here uses
  ``grpc://``); with ``--trace`` the latencies are round trips to the server;
  ``--server-cprofile PATH`` runs that server under cProfile and prints its top functions;
* for a sampling profile of every thread without cProfile's overhead, run it under py-spy
  (in the ``bench`` extra): ``py-spy record --gil -o profile.svg -- python -m benchmarks.profile``.

Unlike ``benchmarks.run`` it does not start a fresh process per scenario or check the service
tables: it is for finding costs, not for the figures in README.md. PostgreSQL runs use their own
database (``bench_profile`` on the server of ``BENCH_POSTGRES_URL``), so a profile never touches the
schemas of a comparison running at the same time.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import cProfile
import pstats
import resource
import shutil
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from benchmarks import orchestrate, workload
from benchmarks.baselines import CheckpointAdapter, NoEngineAdapter
from benchmarks.sagaway_adapter import SagawayAdapter
from sagaway.testing.internals import store_of

PROFILE_DB = "bench_profile"
ENGINE_SCHEMA = "profile_sagaway"
TRACED = ("create_workflow", "record_step", "finish_workflow", "get_run", "claim_due", "next_due")


def _postgres_url() -> str:
    import psycopg
    from psycopg import sql

    with psycopg.connect(orchestrate._pg_url_for("postgres"), autocommit=True) as conn:
        if not conn.execute(
            "SELECT 1 FROM pg_database WHERE datname = %s", (PROFILE_DB,)
        ).fetchone():
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(PROFILE_DB)))
    url = orchestrate._pg_url_for(PROFILE_DB)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(ENGINE_SCHEMA))
        )
    return url


async def _preloaded_sqlite(n: int) -> Path:
    """A SQLite engine database holding ``n`` preloaded ended workflows (made once, then kept)."""
    from benchmarks.preload import preload

    path = Path(tempfile.gettempdir()) / f"sagaway-profile-preload-{n}.db"
    if not path.exists():
        partial = path.with_suffix(".partial.db")
        partial.unlink(missing_ok=True)
        print(f"preloading {n:,} ended workflows into {path} (once)...", flush=True)
        await asyncio.to_thread(preload, f"sqlite:///{partial}", n)
        partial.rename(path)
    return path


def _time_batches(store: Any, durations: list[float]) -> None:
    """Record how long each of the SQLite writer's transactions takes (in its thread)."""
    original = store._run_batch

    def timed(conn: Any, batch: Any) -> None:
        started = time.perf_counter()
        original(conn, batch)
        durations.append(time.perf_counter() - started)

    store._run_batch = timed


def _trace(store: Any, stats: dict[str, list[float]]) -> None:
    """Wrap the Store verbs in TRACED to count calls and sum their latency."""
    for name in TRACED:
        original: Callable[..., Awaitable[Any]] = getattr(store, name)

        def wrap(original: Callable[..., Awaitable[Any]], name: str) -> Callable[..., Any]:
            async def timed(*args: Any, **kwargs: Any) -> Any:
                started = time.perf_counter()
                try:
                    return await original(*args, **kwargs)
                finally:
                    entry = stats[name]
                    entry[0] += 1
                    entry[1] += time.perf_counter() - started

            return timed

        setattr(store, name, wrap(original, name))


def _baseline(args: argparse.Namespace, tmp: str, services: workload.Services) -> Any:
    """The adapter of ``--engine checkpoint`` or ``none``; None for Sagaway."""
    if args.engine == "none":
        return NoEngineAdapter({}, services)
    if args.engine != "checkpoint":
        return None
    if args.db == "postgres":
        config = {"kind": "postgres", "url": services.spec["url"], "schema": ENGINE_SCHEMA}
    else:
        config = {"kind": "sqlite", "path": f"{tmp}/checkpoint.db"}
    return CheckpointAdapter(config, services)


async def profile(args: argparse.Namespace) -> None:
    scenario = orchestrate.SCENARIOS[args.scenario]
    n: int = args.n or scenario["n"]
    clients: int = args.clients or max(scenario["clients"], 1)
    fail_step = scenario["fail_step"]
    with tempfile.TemporaryDirectory(prefix="sagaway-profile-") as tmp:
        if args.db == "postgres":
            url = _postgres_url()
            services = workload.Services({"kind": "postgres", "url": url})
            engine_url = f"{url}?schema={ENGINE_SCHEMA}"
        else:
            services = workload.Services({"kind": "sqlite", "dir": f"{tmp}/services"})
            engine_url = f"sqlite:///{tmp}/engine.db"
            if args.preload:
                shutil.copyfile(await _preloaded_sqlite(args.preload), f"{tmp}/engine.db")
        services.create()
        config: dict[str, Any] = {
            "url": engine_url,
            "activities": args.activities,
            "telemetry": "on" if args.telemetry else "off",
        }
        server = None
        if args.server or args.server_cprofile:
            from benchmarks.sagaway_server import EngineServer

            server = EngineServer(engine_url, Path(tmp), cprofile=args.server_cprofile)
            server.start()
            config.update(url=server.url, token=server.token)
        adapter: Any = _baseline(args, tmp, services) or SagawayAdapter(config, services)
        await adapter.open()
        stats: dict[str, list[float]] = collections.defaultdict(lambda: [0, 0.0])
        if args.trace and args.engine == "sagaway":
            _trace(store_of(adapter.manager), stats)
        batches: list[float] = []
        if args.batches and args.engine == "sagaway":
            _time_batches(store_of(adapter.manager), batches)
        latencies: list[float] = []

        async def client(ids: list[str]) -> None:
            while ids:
                wf_id = ids.pop()
                started = time.perf_counter()
                result = await adapter.result(await adapter.start(wf_id, fail_step))
                latencies.append(time.perf_counter() - started)
                if result != workload.expected_result(fail_step):
                    raise AssertionError(f"{wf_id}: unexpected result {result!r}")

        try:
            warm = [f"warm-{i}" for i in range(20)]
            await asyncio.gather(*(client(warm) for _ in range(min(clients, 20))))
            latencies.clear()
            stats.clear()
            batches.clear()
            ids = [f"wf-{i:06d}" for i in range(n)]
            profiler = cProfile.Profile() if args.cprofile else None
            before = resource.getrusage(resource.RUSAGE_SELF)
            started = time.perf_counter()
            if profiler is not None:
                profiler.enable()
            await asyncio.gather(*(client(ids) for _ in range(clients)))
            if profiler is not None:
                profiler.disable()
            wall = time.perf_counter() - started
            after = resource.getrusage(resource.RUSAGE_SELF)
        finally:
            await adapter.close()
            services.close()
            if server is not None:
                server.stop()

    latencies.sort()
    user_ms = (after.ru_utime - before.ru_utime) / n * 1000
    sys_ms = (after.ru_stime - before.ru_stime) / n * 1000
    where = f"{args.db} via sagaway server" if args.server or args.server_cprofile else args.db
    if args.engine != "sagaway":
        where = f"{args.engine} on {args.db}"
    print(
        f"{where} {args.scenario} N={n} C={clients}: {n / wall:.1f} wf/s, "
        f"p50 {workload.percentile(latencies, 50) * 1000:.2f} ms, "
        f"CPU of this process {user_ms + sys_ms:.2f} ms/workflow "
        f"(user {user_ms:.2f}, system {sys_ms:.2f})"
    )
    if batches:
        batches.sort()
        print(
            f"  writer transactions: {len(batches)}, p50 "
            f"{workload.percentile(batches, 50) * 1000:.2f} ms, p99 "
            f"{workload.percentile(batches, 99) * 1000:.2f} ms, max {batches[-1] * 1000:.1f} ms, "
            f"{sum(1 for b in batches if b > 0.1)} over 100 ms"
        )
    for name, (calls, total) in sorted(stats.items()):
        print(f"  {name:16s} {calls / n:5.2f} calls/workflow, mean {total / calls * 1000:7.3f} ms")
    if profiler is not None:
        profiler.dump_stats(str(args.cprofile))
        print(f"cProfile stats written to {args.cprofile}; own time, top 25:")
        pstats.Stats(str(args.cprofile)).sort_stats("tottime").print_stats(25)
    if args.server_cprofile:
        print(f"server cProfile stats in {args.server_cprofile} (whole run); own time, top 30:")
        pstats.Stats(str(args.server_cprofile)).sort_stats("tottime").print_stats(30)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.profile", description=__doc__)
    parser.add_argument("--db", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument(
        "--scenario", choices=("A_seq", "A_thr", "B_thr"), default="A_thr", help="default A_thr"
    )
    parser.add_argument("--n", type=int, help="measured workflows (default: the scenario's N)")
    parser.add_argument("--clients", type=int, help="concurrent clients (default: the scenario's)")
    parser.add_argument(
        "--activities", choices=("async", "sync"), default="async", help="as in benchmarks.run"
    )
    parser.add_argument(
        "--engine",
        choices=("sagaway", "checkpoint", "none"),
        default="sagaway",
        help="the baselines, for comparison (default sagaway)",
    )
    parser.add_argument("--trace", action="store_true", help="count Store calls and latency")
    parser.add_argument(
        "--preload", type=int, default=0, metavar="N", help="SQLite: N ended workflows first"
    )
    parser.add_argument(
        "--batches", action="store_true", help="SQLite: the writer's transaction durations"
    )
    parser.add_argument(
        "--telemetry",
        action="store_true",
        help="metrics and SDK tracing on, as `benchmarks.run --telemetry on`",
    )
    parser.add_argument("--cprofile", metavar="PATH", type=Path, help="cProfile the measured part")
    parser.add_argument("--server", action="store_true", help="through a `sagaway server` process")
    parser.add_argument(
        "--server-cprofile", metavar="PATH", type=Path, help="--server, under cProfile"
    )
    args = parser.parse_args(argv)
    asyncio.run(profile(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
