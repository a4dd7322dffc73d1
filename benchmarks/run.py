"""Run the order-saga benchmark on Sagaway: ``python -m benchmarks.run [--db sqlite|postgres]``.

Each scenario runs in a fresh subprocess (``benchmarks.scenario``) with a fresh engine database
and fresh service databases in a temporary workdir; this process only orchestrates, measures the
child's CPU time and peak RSS (``wait4``), prints a table and optionally writes JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import os
import platform
import shlex
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
import urllib.parse
import uuid
from pathlib import Path
from typing import Any

from benchmarks import workload

REPO = Path(__file__).resolve().parent.parent

SCENARIOS: dict[str, dict[str, Any]] = {
    "A_seq": {"n": 200, "clients": 1, "fail_step": None},
    "A_thr": {"n": 1000, "clients": 100, "fail_step": None},
    "B_thr": {"n": 500, "clients": 100, "fail_step": workload.FAIL_STEP},
}
QUICK_N = {"A_seq": 20, "A_thr": 100, "B_thr": 50}
QUICK_WARMUP = 5

DEFAULT_PG_URL = "postgresql://postgres@127.0.0.1:5432/test"


class BackendUnavailable(Exception):
    """The backend cannot be used here (missing driver, unfinished store, no server)."""


# ---------------------------------------------------------------------- PostgreSQL helpers


def _postgres_url() -> tuple[str, str]:
    """The engine URL (with ``schema=``) and its schema name."""
    url = os.environ.get("SAGAWAY_BENCH_POSTGRES_URL") or (
        f"{DEFAULT_PG_URL}?schema=bench_{uuid.uuid4().hex[:10]}"
    )
    parts = urllib.parse.urlsplit(url)
    params = urllib.parse.parse_qsl(parts.query)
    schema = dict(params).get("schema")
    if schema is None:
        schema = f"bench_{uuid.uuid4().hex[:10]}"
        params.append(("schema", schema))
        url = urllib.parse.urlunsplit(parts._replace(query=urllib.parse.urlencode(params)))
    if not schema.startswith("bench_"):
        raise BackendUnavailable(
            f"the benchmark drops its schema before every scenario and at the end; refusing to "
            f"use schema {schema!r} (name it bench_<something> in SAGAWAY_BENCH_POSTGRES_URL)"
        )
    return url, schema


def _libpq_conninfo(url: str) -> str:
    """The URL without Sagaway's own parameters (``schema``, ``pool_size``)."""
    parts = urllib.parse.urlsplit(url)
    params = [
        (k, v) for k, v in urllib.parse.parse_qsl(parts.query) if k not in ("schema", "pool_size")
    ]
    return urllib.parse.urlunsplit(parts._replace(query=urllib.parse.urlencode(params)))


def _drop_schema(url: str, schema: str) -> None:
    import psycopg
    from psycopg import sql

    with psycopg.connect(_libpq_conninfo(url), autocommit=True, connect_timeout=10) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


def _preflight_postgres(url: str) -> None:
    """Import the PostgreSQL store and open/close a Manager on ``url``."""
    try:
        import sagaway as sw
        from sagaway.store.postgres import PostgresStore  # noqa: F401
    except Exception as exc:
        raise BackendUnavailable(
            f"cannot import the PostgreSQL store: {type(exc).__name__}: {exc}"
        ) from exc

    async def probe() -> None:
        manager = sw.Manager(url)
        async with manager.connect():
            await manager.count_workflows()

    try:
        asyncio.run(asyncio.wait_for(probe(), 60))
    except Exception as exc:
        raise BackendUnavailable(
            f"cannot open the PostgreSQL store at {_shown(url)}: {type(exc).__name__}: {exc}"
        ) from exc


def _shown(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    user_info, at, host = parts.netloc.rpartition("@")
    return urllib.parse.urlunsplit(
        parts._replace(netloc=f"{user_info.partition(':')[0]}{at}{host}")
    )


# ---------------------------------------------------------------------- running scenarios


def _run_child(spec: dict[str, Any], out: Path, log: Path, timeout: float) -> dict[str, Any]:
    """Run one scenario process; returns its record plus CPU/RSS from wait4()."""
    cmd = [
        sys.executable,
        "-m",
        "benchmarks.scenario",
        "--spec",
        json.dumps(spec),
        "--out",
        str(out),
    ]
    t0 = time.perf_counter()
    with log.open("wb") as log_file:
        proc = subprocess.Popen(cmd, cwd=REPO, stdout=log_file, stderr=subprocess.STDOUT)
        timed_out = False
        while True:
            pid, status, rusage = os.wait4(proc.pid, os.WNOHANG)
            if pid == proc.pid:
                break
            if time.perf_counter() - t0 > timeout and not timed_out:
                timed_out = True
                proc.kill()  # our own child, by its pid
            time.sleep(0.05)
        proc.returncode = os.waitstatus_to_exitcode(status)
    elapsed = time.perf_counter() - t0
    output = log.read_text(errors="replace")
    record: dict[str, Any] = json.loads(out.read_text()) if out.exists() else {}
    if timed_out:
        record["failed"] = f"timed out after {timeout:.0f}s (killed)"
    elif proc.returncode != 0 and "failed" not in record:
        record["failed"] = f"exit code {proc.returncode}"
    record["process"] = {
        "exit_code": proc.returncode,
        "elapsed_s": elapsed,
        "cpu_user_s": rusage.ru_utime,
        "cpu_sys_s": rusage.ru_stime,
        "peak_rss_mb": rusage.ru_maxrss / 1024,  # Linux: KiB
    }
    if output.strip():
        record["process"]["output_tail"] = output.splitlines()[-40:]
    return record


def run_backend(
    db: str, scenarios: list[str], quick: bool, activities: str, timeout: float, keep: bool
) -> dict[str, Any]:
    pg_url = schema = None
    if db == "postgres":
        pg_url, schema = _postgres_url()
        _preflight_postgres(pg_url)
    records: dict[str, Any] = {}
    try:
        for name in scenarios:
            base = SCENARIOS[name]
            workdir = Path(tempfile.mkdtemp(prefix=f"sagaway-bench-{db}-{name}-"))
            if db == "postgres":
                assert pg_url is not None and schema is not None
                _drop_schema(pg_url, schema)  # fresh engine state
                engine_url = pg_url
            else:
                engine_url = f"sqlite:///{workdir / 'engine.db'}"
            spec = {
                "scenario": name,
                "n": QUICK_N[name] if quick else base["n"],
                "clients": base["clients"],
                "warmup": QUICK_WARMUP if quick else workload.WARMUP,
                "fail_step": base["fail_step"],
                "workdir": str(workdir),
                "engine_url": engine_url,
                "activities": activities,
            }
            print(f"[{db}] {name}: N={spec['n']} C={spec['clients']} ...", flush=True)
            try:
                record = _run_child(spec, workdir / "result.json", workdir / "output.log", timeout)
            finally:
                if not keep:
                    shutil.rmtree(workdir, ignore_errors=True)
            record["workdir"] = str(workdir) if keep else None
            records[name] = record
            print("    " + _one_line(record), flush=True)
            if "failed" in record:
                for line in record.get("process", {}).get("output_tail", []):
                    print(f"    | {line}", flush=True)
    finally:
        if db == "postgres" and pg_url is not None and schema is not None:
            try:
                _drop_schema(pg_url, schema)
            except Exception as exc:
                print(f"warning: could not drop schema {schema}: {exc}", file=sys.stderr)
    return records


# ---------------------------------------------------------------------- reporting


def _one_line(r: dict[str, Any]) -> str:
    if "failed" in r:
        return f"FAILED: {r['failed']}"
    lat = r["latency_ms"]
    return (
        f"{r['throughput_wf_s']:.1f} wf/s, p50 {lat['p50']:.1f} ms, p99 {lat['p99']:.1f} ms, "
        f"wrong {r['wrong_results']}, errors {r['errors']}, "
        f"services {'ok' if r['service_check']['ok'] else 'MISMATCH'}"
    )


def format_table(results: dict[str, dict[str, Any]]) -> str:
    head = (
        "backend", "scenario", "N", "C", "wf/s", "p50 ms", "p90 ms", "p99 ms", "max ms",
        "wrong", "errors", "service rows", "re-exec", "CPU s", "RSS MB",
    )  # fmt: skip
    rows: list[tuple[str, ...]] = [head]
    notes: list[str] = []
    for db, records in results.items():
        for name, r in records.items():
            if "failed" in r:
                rows.append((db, name, *["-"] * 13))
                notes.append(f"{db}/{name} FAILED: {r['failed']}")
                continue
            lat, chk, proc = r["latency_ms"], r["service_check"], r["process"]
            rows.append(
                (
                    db, name, str(r["n"]), str(r["clients"]),
                    f"{r['throughput_wf_s']:.1f}",
                    f"{lat['p50']:.2f}", f"{lat['p90']:.2f}", f"{lat['p99']:.2f}",
                    f"{lat['max']:.2f}",
                    str(r["wrong_results"]), str(r["errors"]),
                    f"{chk['rows']}/{chk['expected_rows']} {'ok' if chk['ok'] else 'BAD'}",
                    str(chk["reexecuted_effects"]),
                    f"{proc['cpu_user_s'] + proc['cpu_sys_s']:.1f}",
                    f"{proc['peak_rss_mb']:.0f}",
                )
            )  # fmt: skip
        seq = records.get("A_seq")
        if seq and "failed" not in seq:
            notes.append(
                f"{db}: per-step ms (A_seq p50 / 4 steps) = {seq['latency_ms']['p50'] / 4:.2f}"
            )
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    lines = ["  ".join(cell.rjust(w) for cell, w in zip(row, widths, strict=True)) for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join([*lines, "", *notes])


def machine_info() -> dict[str, Any]:
    cpu = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        import sagaway

        version = sagaway.__version__
    except Exception:
        version = "?"
    return {
        "nproc": os.cpu_count(),
        "cpu": cpu,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "sqlite": sqlite3.sqlite_version,
        "sagaway": version,
    }


def _python() -> str:
    """The interpreter as typed from the current directory (``.venv/bin/python``)."""
    try:
        return str(Path(sys.executable).relative_to(Path.cwd()))
    except ValueError:
        return sys.executable


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.run", description="Order-saga benchmark of Sagaway."
    )
    parser.add_argument(
        "--db",
        choices=("sqlite", "postgres", "all"),
        default="sqlite",
        help="engine backend (postgres: $SAGAWAY_BENCH_POSTGRES_URL or a bench_<random> schema)",
    )
    parser.add_argument("--quick", action="store_true", help="small N, for smoke checks")
    parser.add_argument("--json", metavar="PATH", help="write the results as JSON")
    parser.add_argument(
        "--scenario", action="append", choices=tuple(SCENARIOS), help="run only these (repeatable)"
    )
    parser.add_argument(
        "--activities",
        choices=("sync", "async"),
        default="async",
        help="async def + asyncio.to_thread (default), or plain def run in the engine's pool",
    )
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per scenario")
    parser.add_argument("--keep", action="store_true", help="keep the scenario workdirs")
    args = parser.parse_args(argv)

    backends = ["sqlite", "postgres"] if args.db == "all" else [args.db]
    scenarios = args.scenario or list(SCENARIOS)
    machine = machine_info()
    started = dt.datetime.now().astimezone()
    print(
        f"sagaway {machine['sagaway']} | python {machine['python']} | nproc {machine['nproc']} | "
        f"sqlite {machine['sqlite']} | {started:%Y-%m-%d %H:%M %Z}",
        flush=True,
    )
    results: dict[str, dict[str, Any]] = {}
    skipped: dict[str, str] = {}
    for db in backends:
        try:
            results[db] = run_backend(
                db, scenarios, args.quick, args.activities, args.timeout, args.keep
            )
        except BackendUnavailable as exc:
            print(f"SKIPPING backend {db}: {exc}", file=sys.stderr, flush=True)
            skipped[db] = str(exc)
    print()
    if results:
        print(format_table(results))
    for db, why in skipped.items():
        print(f"{db}: skipped ({why})")

    if args.json:
        doc = {
            "date": started.isoformat(timespec="seconds"),
            "command": shlex.join([_python(), "-m", "benchmarks.run", *sys.argv[1:]]),
            "quick": args.quick,
            "machine": machine,
            "workload": {
                "warmup": QUICK_WARMUP if args.quick else workload.WARMUP,
                "svc_pool_size": workload.SVC_POOL_SIZE,
                "service_backend": "sqlite files (WAL, synchronous=NORMAL, busy_timeout 30 s)",
                "activities": args.activities,
            },
            "results": results,
            "skipped": skipped,
        }
        Path(args.json).write_text(json.dumps(doc, indent=2) + "\n")
        print(f"wrote {args.json}")
    bad = any(
        "failed" in r or r["wrong_results"] or r["errors"] or not r["service_check"]["ok"]
        for records in results.values()
        for r in records.values()
    )
    return 1 if bad or (skipped and not results) else 0


if __name__ == "__main__":
    sys.exit(main())
