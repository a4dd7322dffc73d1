"""Run the order-saga benchmark: ``python -m benchmarks.run [--db sqlite|postgres|all]``.

Sagaway alone, on its SQLite and/or PostgreSQL backend, scenarios A_seq, A_thr, B_thr and C.
``--compare`` runs the whole comparison instead (every engine, ``benchmarks.compare``; the other
options of ``compare`` may follow, e.g. ``--compare --quick``).

Each scenario runs in a fresh subprocess (``benchmarks.scenario``) with fresh engine state and
fresh service tables (``benchmarks.orchestrate``); this process only orchestrates and measures.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import shlex
import sys
from pathlib import Path
from typing import Any

from benchmarks import orchestrate, report
from benchmarks.compare import _one_line, _python, machine, versions
from benchmarks.orchestrate import SCENARIOS, Target, Unavailable

SAGAWAY_TARGETS = {
    "sqlite": Target("sagaway/sqlite", "sagaway", "sqlite", "Sagaway / SQLite"),
    "postgres": Target("sagaway/postgres", "sagaway", "postgres", "Sagaway / PostgreSQL"),
}


def _preflight_postgres() -> None:
    orchestrate.ensure_bench_database()
    try:
        import sagaway.store.postgres  # noqa: F401
    except Exception as exc:
        raise Unavailable(
            f"cannot import the PostgreSQL store: {type(exc).__name__}: {exc}"
        ) from exc


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--compare" in argv:
        from benchmarks import compare

        argv.remove("--compare")
        return compare.main(argv, prog="python -m benchmarks.run --compare")

    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.run", description="Order-saga benchmark of Sagaway."
    )
    parser.add_argument("--compare", action="store_true", help="run the whole comparison")
    parser.add_argument(
        "--db",
        choices=("sqlite", "postgres", "all"),
        default="sqlite",
        help=f"engine backend (postgres: schema bench_sagaway in {orchestrate.BENCH_PG_URL})",
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
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per process")
    parser.add_argument("--keep", action="store_true", help="keep the scenario workdirs")
    args = parser.parse_args(argv)

    backends = ["sqlite", "postgres"] if args.db == "all" else [args.db]
    scenarios = args.scenario or list(SCENARIOS)
    started = dt.datetime.now().astimezone()
    vers = versions()
    vers["sagaway_code"] = orchestrate.snapshot_sagaway()
    print(
        f"sagaway {vers['sagaway']} | python {vers['python']} | sqlite {vers['sqlite']} | "
        f"postgresql {vers['postgresql']} | {started:%Y-%m-%d %H:%M %Z}",
        flush=True,
    )
    results: report.Results = {}
    labels: dict[str, str] = {}
    skipped: dict[str, str] = {}
    for db in backends:
        target = SAGAWAY_TARGETS[db]
        if db == "postgres":
            try:
                _preflight_postgres()
            except Unavailable as exc:
                print(f"SKIPPING backend {db}: {exc}", file=sys.stderr, flush=True)
                skipped[db] = str(exc)
                continue
        labels[target.key] = target.label
        results[target.key] = {}
        for name in scenarios:
            print(f"[{db}] {name} ...", flush=True)
            record = orchestrate.run_scenario(
                target,
                name,
                quick=args.quick,
                activities=args.activities,
                timeout=args.timeout,
                keep=args.keep,
            )
            results[target.key][name] = record
            print("    " + _one_line(record), flush=True)
            if "failed" in record:
                for line in record.get("process", {}).get("output_tail", [])[-15:]:
                    print(f"    | {line}", flush=True)
    if "postgres" in backends:
        orchestrate.cleanup_postgres()
    print()
    if results:
        print(report.detail_table(results, labels))
        print()
        print(report.crash_table(results, labels))
    for db, why in skipped.items():
        print(f"{db}: skipped ({why})")

    if args.json:
        doc: dict[str, Any] = {
            "date": started.isoformat(timespec="seconds"),
            "command": shlex.join([_python(), "-m", "benchmarks.run", *argv]),
            "quick": args.quick,
            "machine": machine(),
            "versions": vers,
            "activities": args.activities,
            "results": results,
            "skipped": skipped,
        }
        Path(args.json).write_text(json.dumps(doc, indent=2, default=str) + "\n")
        print(f"wrote {args.json}")
    bad = any(not report.clean(r) for recs in results.values() for r in recs.values())
    return 1 if bad or (skipped and not results) else 0


if __name__ == "__main__":
    sys.exit(main())
