"""A worker's memory with N workflows WAITING (timers and signal waits), N = 10,000 and 1,000,000.

    .venv/bin/python -m benchmarks.waiting_memory --db sqlite|postgres [--n 10000 --n 1000000]
        [--seconds 60] [--json PATH]

For each N, in a fresh store:

1. **Templates by the engine.** A Manager (``benchmarks.waiting_memory_app``) starts two
   workflows and runs them until both are WAITING: ``bench.wait_timer`` (a 30-day
   ``manager.sleep``) and ``bench.wait_signal`` (``signal("approval").receive``). Their rows
   (``workflows`` and ``steps``; nothing else is written for a wait) are read back.
2. **Copies by SQL.** N - 2 copies of them are inserted (half timers, half signal waits): each
   the template's row with only what differs per workflow replaced: run id (the engine's
   generator), key and key space (``t-00000001``, ``s-00000001``), args (``{"n": i}``) and their
   hash (the engine's function), and for a timer its wake-up time (spread over the next 1 to 30
   days) in ``next_run_at`` and in its ``sleep`` step. So the store holds exactly the rows the
   engine would have written for N waits, in a minute rather than hours.
3. **The worker.** ``sagaway worker benchmarks.waiting_memory_app:manager`` (default settings:
   recovery scan every second, heartbeat, scheduler) starts against that store; its ``VmRSS``
   is sampled from /proc every 0.5 s for ``--seconds``, then ``VmHWM`` (the peak) is read.
   "steady" is the median of the samples of the last third. Its CPU over the watch is read from
   /proc/<pid>/stat.
4. **It still works.** One signal is sent to ``s-00000000`` and the time until that workflow is
   COMPLETED is measured; then the number of WAITING workflows is checked (N - 1).

The goal (issue 39, goal 5): RSS with 1,000,000 WAITING within 1.2x of RSS with 10,000.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DAY = 86400.0
CHUNK = 20_000
GOAL_RATIO = 1.2
DEFAULT_NS = (10_000, 1_000_000)


def _proc_kb(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


def _proc_cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# ---------------------------------------------------------------------- the copies


def key_of(kind: str, i: int) -> str:
    """``t-00000001`` (a timer) or ``s-00000001`` (a signal wait)."""
    return f"{kind}-{i:08d}"


def copy_rows(
    template: dict[str, Any], steps: list[dict[str, Any]], kind: str, i: int, wake: float
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The rows the engine writes for workflow ``i`` of ``kind`` (``t``: waits for a timer at
    ``wake``; ``s``: waits for a signal), made from the engine's rows of one such wait."""
    from sagaway import randomness, serialization

    run_id = randomness.new_run_id()
    key = key_of(kind, i)
    args = json.dumps({"n": i}, separators=(",", ":"))
    row = {
        **template,
        "run_id": run_id,
        "key": key,
        "key_space": key,
        "args": args,
        "args_hash": serialization.args_hash(args),
    }
    if kind == "t":
        row["next_run_at"] = _like(template["next_run_at"], wake)
    copies = []
    for step in steps:
        step = {**step, "run_id": run_id}
        if step["kind"] == "sleep":
            step["result"] = repr(wake)
            step["ended_at"] = _like(step["ended_at"], wake)
        copies.append(step)
    return row, copies


def _like(template_value: object, t: float) -> object:
    """``t`` in the type the store keeps times in (seconds as a float, or a datetime)."""
    if isinstance(template_value, float):
        return t
    import datetime

    return datetime.datetime.fromtimestamp(t, tz=datetime.UTC)


def wake_time(i: int, n: int, now: float) -> float:
    """Timers spread over the next 1 to 30 days, none due while the worker is watched."""
    return now + DAY + 29 * DAY * (i / max(n, 1))


def all_copies(
    templates: dict[str, tuple[dict[str, Any], list[dict[str, Any]]]], n: int, now: float
) -> Iterator[tuple[dict[str, Any], list[dict[str, Any]]]]:
    """Indices 1..: ``n // 2`` timers and the rest signal waits, the two templates included."""
    per_kind = {"t": n // 2, "s": n - n // 2}
    for kind, count in per_kind.items():
        template, steps = templates[kind]
        for i in range(1, count):
            yield copy_rows(template, steps, kind, i, wake_time(i, count, now))


# ---------------------------------------------------------------------- the stores


def _sqlite_path(url: str) -> str:
    return url.removeprefix("sqlite:///").split("?", 1)[0]


def _read_templates_sqlite(
    url: str, keys: dict[str, str]
) -> dict[str, tuple[dict[str, Any], list[dict[str, Any]]]]:
    conn = sqlite3.connect(_sqlite_path(url))
    conn.row_factory = sqlite3.Row
    try:
        out = {}
        for kind, key in keys.items():
            wf = dict(conn.execute("SELECT * FROM workflows WHERE key = ?", (key,)).fetchone())
            steps = [
                dict(r)
                for r in conn.execute("SELECT * FROM steps WHERE run_id = ?", (wf["run_id"],))
            ]
            out[kind] = (wf, steps)
        return out
    finally:
        conn.close()


def _insert_sqlite(url: str, copies: Iterator[tuple[dict[str, Any], list[dict[str, Any]]]]) -> None:
    conn = sqlite3.connect(_sqlite_path(url), isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
        while chunk := _take(copies, CHUNK):
            wf_cols = list(chunk[0][0])
            conn.executemany(
                f"INSERT INTO workflows ({', '.join(wf_cols)}) "
                f"VALUES ({', '.join('?' * len(wf_cols))})",
                [tuple(wf[c] for c in wf_cols) for wf, _ in chunk],
            )
            steps = [s for _, ss in chunk for s in ss]
            if steps:
                cols = list(steps[0])
                conn.executemany(
                    f"INSERT INTO steps ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
                    [tuple(s[c] for c in cols) for s in steps],
                )
        conn.execute("COMMIT")
        conn.execute("ANALYZE")
        # Copied into the database file, as the store's checkpoints would have done over time:
        # the worker starts on a store in its steady state, not on a WAL of the whole load.
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()


def _take(it: Iterator[Any], n: int) -> list[Any]:
    out = []
    for item in it:
        out.append(item)
        if len(out) == n:
            break
    return out


def _pg_connect(url: str) -> Any:
    import psycopg
    from psycopg import sql

    from benchmarks.preload import _pg_target

    conn_url, schema = _pg_target(url)
    conn = psycopg.connect(conn_url, autocommit=True)
    conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
    return conn


def _read_templates_pg(
    url: str, keys: dict[str, str]
) -> dict[str, tuple[dict[str, Any], list[dict[str, Any]]]]:
    from psycopg.rows import dict_row

    with _pg_connect(url) as conn:
        out = {}
        for kind, key in keys.items():
            cur = conn.cursor(row_factory=dict_row)
            wf = cur.execute("SELECT * FROM workflows WHERE key = %s", (key,)).fetchone()
            steps = cur.execute("SELECT * FROM steps WHERE run_id = %s", (wf["run_id"],)).fetchall()
            out[kind] = (wf, steps)
        return out


def _insert_pg(url: str, copies: Iterator[tuple[dict[str, Any], list[dict[str, Any]]]]) -> None:
    from psycopg import sql

    with _pg_connect(url) as conn, conn.transaction():
        # The NOTIFY triggers off during the load (a listener would hear a million notices).
        conn.execute("ALTER TABLE workflows DISABLE TRIGGER USER")
        while chunk := _take(copies, CHUNK):
            for table, rows in (("workflows", [w for w, _ in chunk]), ("steps", [])):
                if table == "steps":
                    rows = [s for _, ss in chunk for s in ss]
                if not rows:
                    continue
                cols = list(rows[0])
                copy = sql.SQL("COPY {} ({}) FROM STDIN").format(
                    sql.Identifier(table), sql.SQL(", ").join(map(sql.Identifier, cols))
                )
                with conn.cursor().copy(copy) as cp:
                    for r in rows:
                        cp.write_row(tuple(r[c] for c in cols))
        conn.execute("ALTER TABLE workflows ENABLE TRIGGER USER")
    with _pg_connect(url) as conn:
        conn.execute("VACUUM ANALYZE workflows, steps")


# ---------------------------------------------------------------------- the run


async def _templates(url: str) -> None:
    import sagaway as sw
    from benchmarks import waiting_memory_app as app

    manager = app.make_manager(url)
    async with manager:
        await manager.workflow(app.TIMER, 0).execute(idempotency_key=key_of("t", 0))
        await manager.workflow(app.SIGNAL, 0).execute(idempotency_key=key_of("s", 0))
        worker = manager.worker
        assert worker is not None
        # Both are WAITING once committed and unwound: seen only by looking.
        while (await manager.count_workflows()).get(  # noqa: ASYNC110
            sw.WorkflowStatus.WAITING, 0
        ) < 2 or worker.running_ids:
            await asyncio.sleep(0.05)


def fill(url: str, n: int) -> float:
    """N WAITING workflows in the store at ``url`` (two by the engine, the rest copies); the
    seconds it took."""
    t0 = time.perf_counter()
    asyncio.run(_templates(url))
    keys = {"t": key_of("t", 0), "s": key_of("s", 0)}
    sqlite = url.startswith("sqlite")
    templates = (_read_templates_sqlite if sqlite else _read_templates_pg)(url, keys)
    copies = all_copies(templates, n, time.time())
    (_insert_sqlite if sqlite else _insert_pg)(url, copies)
    return time.perf_counter() - t0


async def _counts(url: str) -> dict[str, int]:
    import sagaway as sw

    async with sw.Manager(url).connect() as manager:
        return {s.value: c for s, c in (await manager.count_workflows()).items()}


async def _signal_and_wait(url: str, key: str) -> float:
    import sagaway as sw

    manager = sw.Manager(url)
    async with manager.connect():
        t0 = time.perf_counter()
        await manager.signal("approval").send(key, 1)
        handle = manager.get_workflow(key)
        await handle.result(timeout=120)
        return time.perf_counter() - t0


def watch(url: str, seconds: float, signal_key: str = key_of("s", 0)) -> dict[str, Any]:
    """Start a worker on ``url``, sample its memory for ``seconds``, check it still works (a
    signal to ``signal_key`` completes that workflow)."""
    # ROOT first (the app), then any PYTHONPATH given (a copy of another Sagaway to compare).
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    env = {**os.environ, "PYTHONPATH": path, "BENCH_WAITING_DB_URL": url}
    worker = subprocess.Popen(
        [sys.executable, "-m", "sagaway", "worker", "benchmarks.waiting_memory_app:manager"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
    )
    try:
        samples: list[tuple[float, float]] = []
        t0 = time.perf_counter()
        while (t := time.perf_counter() - t0) < seconds:
            if worker.poll() is not None:
                raise RuntimeError(f"the worker exited with {worker.returncode}")
            samples.append((round(t, 1), _proc_kb(worker.pid, "VmRSS") / 1024))
            time.sleep(0.5)
        cpu = _proc_cpu_s(worker.pid)
        peak = _proc_kb(worker.pid, "VmHWM") / 1024
        last = [rss for _, rss in samples[-max(len(samples) // 3, 1) :]]
        resumed = asyncio.run(_signal_and_wait(url, signal_key))
        rss_after = _proc_kb(worker.pid, "VmRSS") / 1024
    finally:
        worker.terminate()
        worker.wait(60)
    return {
        "watch_s": seconds,
        "rss_steady_mb": round(statistics.median(last), 1),
        "rss_peak_mb": round(peak, 1),
        "rss_first_mb": round(samples[0][1], 1),
        "rss_after_signal_mb": round(rss_after, 1),
        "worker_cpu_s": round(cpu, 2),
        "signal_to_completed_s": round(resumed, 3),
        "samples": samples,
    }


def run_one(db: str, n: int, seconds: float, tmp: str) -> dict[str, Any]:
    if db == "sqlite":
        url = f"sqlite:///{tmp}/waiting-{n}.db"
    else:
        base = os.environ.get(
            "SAGAWAY_BENCH_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/bench"
        )
        url = f"{base}?schema=bench_waitmem_{uuid.uuid4().hex[:8]}"
    try:
        fill_s = fill(url, n)
        result = {"db": db, "n": n, "fill_s": round(fill_s, 1), **watch(url, seconds)}
        counts = asyncio.run(_counts(url))
        result["waiting_after"] = counts.get("WAITING", 0)
        result["loadavg"] = os.getloadavg()
        return result
    finally:
        if db == "sqlite":
            for p in Path(tmp).glob(f"waiting-{n}.db*"):
                p.unlink()
        else:
            _drop_schema(url)


def _drop_schema(url: str) -> None:
    import psycopg
    from psycopg import sql

    from benchmarks.preload import _pg_target

    conn_url, schema = _pg_target(url)
    with psycopg.connect(conn_url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


def ratio(results: list[dict[str, Any]], key: str = "rss_steady_mb") -> float | None:
    """RSS at the largest N over RSS at the smallest (the goal: <= 1.2)."""
    if len(results) < 2:
        return None
    ordered = sorted(results, key=lambda r: r["n"])
    return round(ordered[-1][key] / ordered[0][key], 3)


def run(db: str, ns: list[int], seconds: float) -> dict[str, Any]:
    """``run_one`` for each N, and the ratios (largest N over smallest)."""
    sys.path.insert(0, str(ROOT))
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in ns:
            result = run_one(db, n, seconds, tmp)
            results.append(result)
            shown = {k: v for k, v in result.items() if k != "samples"}
            print(json.dumps(shown), flush=True)
    return {
        "runs": results,
        "steady_ratio": ratio(results),
        "peak_ratio": ratio(results, "rss_peak_mb"),
        "goal": GOAL_RATIO,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--n", type=int, action="append", help="default: 10000 and 1000000")
    parser.add_argument(
        "--seconds", type=float, default=60.0, help="how long the worker is watched"
    )
    parser.add_argument("--json", metavar="PATH", help="also write the figures as JSON")
    args = parser.parse_args()
    summary = run(args.db, args.n or list(DEFAULT_NS), args.seconds)
    print(json.dumps({k: v for k, v in summary.items() if k != "runs"}))
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=2) + "\n")


if __name__ == "__main__":
    main()
