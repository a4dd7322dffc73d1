"""Run the order-saga benchmark: ``python -m benchmarks.run [--db DB ...] [--repeat K]``.

Sagaway alone, on its SQLite and/or PostgreSQL backend, embedded or through the Engine Server
(``grpc+sqlite``, ``grpc+postgres``: a ``sagaway server`` process holds the database, the
benchmark's Manager uses ``grpc://``), scenarios A_seq, A_thr, B_thr and C. ``--db`` repeats;
``--repeat K`` runs every scenario K times and reports the median run.
``--compare`` runs the whole comparison instead (every engine, ``benchmarks.compare``; the other
options of ``compare`` may follow, e.g. ``--compare --quick``).
``--telemetry on`` enables Sagaway's metrics and tracing in the benchmark process
(``benchmarks.sagaway_telemetry``); ``both`` runs every scenario with it off and on, in
alternating order, and prints the ratio of the medians.
``--codec encrypt`` seals every payload with ``sw.codecs.Encrypt`` (its throughput cost).

Each scenario runs in a fresh subprocess (``benchmarks.scenario``) with fresh engine state and
fresh service tables (``benchmarks.orchestrate``); this process only orchestrates and measures.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import json
import shlex
import statistics
import sys
from pathlib import Path
from typing import Any

from benchmarks import orchestrate, report
from benchmarks.compare import _one_line, _python, machine, versions
from benchmarks.orchestrate import SCENARIOS, Target, Unavailable

SAGAWAY_TARGETS = {
    "sqlite": Target("sagaway/sqlite", "sagaway", "sqlite", "Sagaway / SQLite"),
    "postgres": Target("sagaway/postgres", "sagaway", "postgres", "Sagaway / PostgreSQL"),
    "grpc+sqlite": Target(
        "sagaway/grpc+sqlite", "sagaway", "grpc+sqlite", "Sagaway server / SQLite"
    ),
    "grpc+postgres": Target(
        "sagaway/grpc+postgres", "sagaway", "grpc+postgres", "Sagaway server / PostgreSQL"
    ),
}
ALL = ("sqlite", "postgres", "grpc+sqlite", "grpc+postgres")

SERVER_GOALS = (
    ("grpc+postgres", "postgres"),
    ("grpc+sqlite", "sqlite"),
)
"""(through the server, embedded): A_thr >= 0.5x embedded, A_seq p50 within 2 ms of embedded."""


def _preflight_postgres() -> None:
    orchestrate.ensure_bench_database()
    try:
        import sagaway.store.postgres  # noqa: F401
    except Exception as exc:
        raise Unavailable(
            f"cannot import the PostgreSQL store: {type(exc).__name__}: {exc}"
        ) from exc


def _preflight_server() -> None:
    try:
        import grpc  # noqa: F401

        import sagaway.server.app  # noqa: F401
    except Exception as exc:
        raise Unavailable(
            f"cannot import the Engine Server: {type(exc).__name__}: {exc} "
            "(pip install 'sagaway[server]')"
        ) from exc


def server_goals(results: report.Results) -> list[str]:
    """The Engine Server's goals against the same database embedded, as printable lines."""
    lines = []
    for served, embedded in SERVER_GOALS:
        s_key, e_key = SAGAWAY_TARGETS[served].key, SAGAWAY_TARGETS[embedded].key
        thr_s, thr_e = (report.metric(results, k, "A_thr") for k in (s_key, e_key))
        if thr_s is not None and thr_e is not None:
            ratio = thr_s / thr_e
            verdict = "MET" if ratio >= 0.5 else "MISSED"
            lines.append(
                f"{served} A_thr {thr_s:.1f} wf/s = {ratio:.2f}x {embedded} ({thr_e:.1f}); "
                f"goal >= 0.5x: {verdict}"
            )
        seq_s, seq_e = (report.metric(results, k, "A_seq") for k in (s_key, e_key))
        if seq_s is not None and seq_e is not None:
            diff = seq_s - seq_e
            verdict = "MET" if diff <= 2.0 else "MISSED"
            lines.append(
                f"{served} A_seq p50 {seq_s:.2f} ms = {embedded} ({seq_e:.2f}) {diff:+.2f} ms; "
                f"goal <= +2 ms: {verdict}"
            )
    return lines


TELEMETRY_GOAL = 0.90
"""Throughput with metrics and tracing on >= this fraction of the throughput with them off."""


def with_telemetry(target: Target, ratio: float = 1.0) -> Target:
    """``target`` with Sagaway's metrics and tracing on in the benchmark process (traces
    sampled at ``ratio``)."""
    return dataclasses.replace(
        target,
        key=f"{target.key}+telemetry",
        label=f"{target.label} + telemetry",
        options=(*target.options, ("telemetry", "on"), ("trace_ratio", repr(ratio))),
    )


def with_preload(target: Target, n: int) -> Target:
    """``target`` on a store holding ``n`` ended workflows (0: unchanged); key ``...-preload``."""
    if n <= 0:
        return target
    return dataclasses.replace(
        target,
        key=f"{target.key}-preload",
        label=f"{target.label}, {n:,} ended workflows preloaded",
        preload=n,
    )


def history_lines(results: report.Results) -> list[str]:
    """The preload and history probes of every preloaded record, as printable lines."""
    from benchmarks import history

    lines = []
    for key, by_name in results.items():
        for name, record in by_name.items():
            if "history" in record:
                pre = record["preload"]
                lines.append(f"{key} {name}: preloaded {pre['n']:,} in {pre['load_s']:.1f} s")
                lines += history.goal_lines(record["history"], f"{key} {name}")
    return lines


def with_codec(target: Target, codec: str) -> Target:
    """``target`` with its payloads sealed by ``codec`` (``none``: unchanged)."""
    if codec == "none":
        return target
    return dataclasses.replace(
        target,
        key=f"{target.key}+{codec}",
        label=f"{target.label} + {codec}",
        options=(*target.options, ("codec", codec)),
    )


def telemetry_variants(
    target: Target, mode: str, round_no: int, ratio: float = 1.0
) -> list[Target]:
    """The variants to run this round; with ``both``, off first in odd rounds, on first in even
    ones, so that drift in the machine's load hits both alike."""
    if mode == "off":
        return [target]
    if mode == "on":
        return [with_telemetry(target, ratio)]
    pair = [target, with_telemetry(target, ratio)]
    return pair if round_no % 2 else pair[::-1]


def _median(records: list[dict[str, Any]], field: str) -> float | None:
    values = [float(r[field]) for r in records if report.clean(r) and r.get(field) is not None]
    return statistics.median(values) if values else None


def telemetry_cost(runs: dict[str, dict[str, list[dict[str, Any]]]]) -> list[str]:
    """Per backend and scenario: median throughput with telemetry on / off, as printable lines
    (A_seq also its median p50 latency)."""
    lines = []
    for key, by_name in runs.items():
        on = runs.get(f"{key}+telemetry")
        if key.endswith("+telemetry") or on is None:
            continue
        for name, off_records in by_name.items():
            on_records = on.get(name, [])
            thr_off = _median(off_records, "throughput_wf_s")
            thr_on = _median(on_records, "throughput_wf_s")
            if thr_off is None or thr_on is None:
                lines.append(f"telemetry cost: {key} {name}: no clean runs to compare")
                continue
            ratio = thr_on / thr_off
            verdict = "MET" if ratio >= TELEMETRY_GOAL else "MISSED"
            line = (
                f"telemetry cost: {key} {name} on/off = {ratio:.2f}x "
                f"({thr_on:.1f} / {thr_off:.1f} wf/s; goal >= {TELEMETRY_GOAL:.2f}x: {verdict})"
            )
            if name == "A_seq":
                p50 = [
                    statistics.median(r["latency_ms"]["p50"] for r in recs if report.clean(r))
                    for recs in (on_records, off_records)
                ]
                line += f"; p50 {p50[0]:.2f} vs {p50[1]:.2f} ms ({p50[0] - p50[1]:+.2f} ms)"
            lines.append(line)
    return lines


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
        action="append",
        choices=(*ALL, "all"),
        help=f"engine backend, repeatable (default sqlite; postgres: schema bench_sagaway in "
        f"{orchestrate.BENCH_PG_URL}; grpc+X: X behind a `sagaway server` process; all: the four)",
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        metavar="K",
        help="run every scenario K times (rounds); report the median run and the range",
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
    parser.add_argument(
        "--telemetry",
        choices=("off", "on", "both"),
        default="off",
        help="Sagaway's metrics and tracing in the benchmark process: off (default), on, or "
        "both (each scenario off and on in alternating order; prints on/off of the medians)",
    )
    parser.add_argument(
        "--trace-ratio",
        type=float,
        default=1.0,
        metavar="R",
        help="with --telemetry: the share of workflows traced (ParentBased(TraceIdRatioBased(R)); "
        "default 1.0, every workflow)",
    )
    parser.add_argument(
        "--codec",
        choices=("none", "encrypt"),
        default="none",
        help="encrypt: Manager(codec=sw.codecs.Encrypt(...)) seals every payload (AES-GCM)",
    )
    parser.add_argument(
        "--preload",
        type=int,
        default=0,
        metavar="N",
        help="insert N ended workflows (4 steps each) by SQL before every scenario, then time "
        "`sagaway list`/`show` and the recovery scan on them (keys get a -preload suffix)",
    )
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per process")
    parser.add_argument("--keep", action="store_true", help="keep the scenario workdirs")
    args = parser.parse_args(argv)
    if not 0.0 <= args.trace_ratio <= 1.0:
        parser.error(f"--trace-ratio must be between 0 and 1, not {args.trace_ratio}")

    chosen = args.db or ["sqlite"]
    backends = [db for db in ALL if db in chosen or "all" in chosen]
    scenarios = args.scenario or list(SCENARIOS)
    started = dt.datetime.now().astimezone()
    vers = versions()
    vers["sagaway_code"] = orchestrate.snapshot_sagaway()
    print(
        f"sagaway {vers['sagaway']} | python {vers['python']} | sqlite {vers['sqlite']} | "
        f"postgresql {vers['postgresql']} | {started:%Y-%m-%d %H:%M %Z}",
        flush=True,
    )

    labels: dict[str, str] = {}
    skipped: dict[str, str] = {}
    available: list[str] = []
    for db in backends:
        target = with_preload(with_codec(SAGAWAY_TARGETS[db], args.codec), args.preload)
        try:
            if target.pg:
                _preflight_postgres()
            if target.grpc:
                _preflight_server()
        except Unavailable as exc:
            print(f"SKIPPING backend {db}: {exc}", file=sys.stderr, flush=True)
            skipped[db] = str(exc)
            continue
        available.append(db)
        for variant in telemetry_variants(target, args.telemetry, 1, args.trace_ratio):
            labels[variant.key] = variant.label
    runs: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for round_no in range(1, args.repeat + 1):
        if args.repeat > 1:
            print(f"=== round {round_no}/{args.repeat}", flush=True)
        for db in available:
            for name in scenarios:
                for target in telemetry_variants(
                    with_preload(with_codec(SAGAWAY_TARGETS[db], args.codec), args.preload),
                    args.telemetry,
                    round_no,
                    args.trace_ratio,
                ):
                    print(f"[{target.key.removeprefix('sagaway/')}] {name} ...", flush=True)
                    record = orchestrate.run_scenario(
                        target,
                        name,
                        quick=args.quick,
                        activities=args.activities,
                        timeout=args.timeout,
                        keep=args.keep,
                    )
                    record["round"] = round_no
                    runs.setdefault(target.key, {}).setdefault(name, []).append(record)
                    print("    " + _one_line(record), flush=True)
                    if "failed" in record:
                        for line in record.get("process", {}).get("output_tail", [])[-15:]:
                            print(f"    | {line}", flush=True)
    results = {
        key: {name: report.pick_median(records, name) for name, records in by_name.items()}
        for key, by_name in runs.items()
    }
    if any(SAGAWAY_TARGETS[db].pg for db in available):
        orchestrate.cleanup_postgres()
    print()
    goal_lines = server_goals(results)
    cost_lines = telemetry_cost(runs) + history_lines(results)
    if results:
        if args.repeat > 1:
            print(report.summary_table(results, labels))
            print()
        print(report.detail_table(results, labels))
        print()
        if any("C" in recs for recs in results.values()):
            print(report.crash_table(results, labels))
            print()
        for line in goal_lines + cost_lines:
            print(line)
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
            "telemetry": args.telemetry,
            "trace_ratio": args.trace_ratio,
            "preload": args.preload,
            "telemetry_cost": cost_lines,
            "repeat": args.repeat,
            "server_goals": goal_lines,
            "results": results,
            "runs": runs if args.repeat > 1 or args.telemetry == "both" else None,
            "skipped": skipped,
        }
        Path(args.json).write_text(json.dumps(doc, indent=2, default=str) + "\n")
        print(f"wrote {args.json}")
    bad = any(not report.clean(r) for recs in runs.values() for rs in recs.values() for r in rs)
    return 1 if bad or (skipped and not results) else 0


if __name__ == "__main__":
    sys.exit(main())
