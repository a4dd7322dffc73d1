"""How fast the ``sagaway`` command starts: ``--help``, ``list`` and ``show KEY`` end to end.

    .venv/bin/python -m benchmarks.cli_start            # SQLite and PostgreSQL, 20 runs each
    .venv/bin/python -m benchmarks.cli_start --runs 50 --no-postgres

Preloads a few hundred ended workflows (``benchmarks.preload``) into a fresh SQLite file and a
fresh PostgreSQL schema, then runs each command as an operator does (the ``sagaway`` script next
to this interpreter, bytecode already written, ``NO_COLOR``), the commands taking turns run after
run so that a change of the machine's load hits them alike. Per command: the median and p90 of
the wall time of the subprocess (interpreter start to exit) and the median CPU time (``wait4``),
against the goal (list/show: 150 ms on SQLite, 200 ms on PostgreSQL). The load average is
printed before and after: on a loaded machine wall times grow with it.

``--importtime N`` (default 5) adds, per command, the median and the least over N runs of the
time its imports took (``python -X importtime``: the sum of the cumulative times of the
top-level imports) and the costliest top-level imports. On a loaded machine the least of N
(of the imports, and of the CPU time) is the figure nearest to a quiet machine's.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.preload import preload, sample

GOAL_MS = {"sqlite": 150.0, "postgres": 200.0}
"""``sagaway list`` and ``sagaway show KEY``, end to end, at most (issue 39, goal 4)."""
SCHEMA = "bench_cli_start"
ROWS = 300

# As an installed Sagaway runs: bytecode written once, not compiled again by every command.
_ENV = {
    **{k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"},
    "NO_COLOR": "1",
}


def _sagaway() -> list[str]:
    """The ``sagaway`` script of this interpreter's environment (else ``python -m sagaway``)."""
    script = Path(sys.executable).with_name("sagaway")
    return [str(script)] if script.exists() else [sys.executable, "-m", "sagaway"]


def _run(command: list[str]) -> tuple[float, float]:
    """(wall ms, CPU ms) of one command, which must exit 0."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=_ENV)
    assert proc.stderr is not None
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = (time.perf_counter() - t0) * 1000
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        raise RuntimeError(f"{' '.join(command)}: exit {code}: {err.decode()[-2000:]}")
    return wall, (usage.ru_utime + usage.ru_stime) * 1000


def _p90(values: list[float]) -> float:
    return statistics.quantiles(values, n=10, method="inclusive")[-1]


def time_commands(commands: dict[str, list[str]], runs: int) -> dict[str, dict[str, Any]]:
    """Median and p90 wall ms and median CPU ms of each command (after one untimed run)."""
    walls: dict[str, list[float]] = {what: [] for what in commands}
    cpus: dict[str, list[float]] = {what: [] for what in commands}
    for args in commands.values():
        _run(args)  # writes the bytecode, warms the caches
    for _ in range(runs):
        for what, args in commands.items():
            wall, cpu = _run(args)
            walls[what].append(wall)
            cpus[what].append(cpu)
    return {
        what: {
            "median_ms": round(statistics.median(walls[what]), 1),
            "p90_ms": round(_p90(walls[what]), 1),
            "cpu_median_ms": round(statistics.median(cpus[what]), 1),
            "cpu_min_ms": round(min(cpus[what]), 1),
        }
        for what in commands
    }


def import_times(args: list[str], runs: int) -> dict[str, Any]:
    """Median ms of a command's imports (``-X importtime``) and its costliest top-level ones."""
    totals: list[float] = []
    tops: dict[str, list[float]] = {}
    for _ in range(runs):
        done = subprocess.run(
            [sys.executable, "-X", "importtime", "-m", "sagaway", *args],
            capture_output=True,
            text=True,
            env=_ENV,
            check=True,
        )
        total = 0.0
        for line in done.stderr.splitlines():
            if not line.startswith("import time:") or "self [us]" in line:
                continue
            _, cumulative, name = line.removeprefix("import time:").split("|")
            if not name.startswith("  "):  # top level: its cumulative time holds the rest
                ms = int(cumulative) / 1000
                total += ms
                tops.setdefault(name.strip(), []).append(ms)
        totals.append(total)
    costliest = sorted(tops.items(), key=lambda kv: -min(kv[1]))[:10]
    return {
        "imports_median_ms": round(statistics.median(totals), 1),
        "imports_min_ms": round(min(totals), 1),
        "top": {name: round(min(ms), 1) for name, ms in costliest},
    }


def _fresh_schema(url: str) -> None:
    import psycopg
    from psycopg import sql

    from benchmarks.preload import _pg_target

    conninfo, schema = _pg_target(url)
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


def _targets(workdir: str, postgres: str | None) -> dict[str, str]:
    """Database URLs with ``ROWS`` ended workflows each."""
    urls = {"sqlite": f"sqlite:///{workdir}/cli_start.db"}
    if postgres is not None:
        sep = "&" if "?" in postgres else "?"
        urls["postgres"] = f"{postgres}{sep}schema={SCHEMA}"
        _fresh_schema(urls["postgres"])
    for url in urls.values():
        preload(url, ROWS)
    return urls


def _loadavg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def measure(runs: int, postgres: str | None, importtime: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="cli_start_") as workdir:
        urls = _targets(workdir, postgres)
        key = sample(ROWS)["key"]
        commands = {"--help": ["--help"]}
        for backend, url in urls.items():
            commands[f"list {backend}"] = ["list", "--db", url]
            commands[f"show KEY {backend}"] = ["show", "--db", url, key]
        record: dict[str, Any] = {"runs": runs, "rows": ROWS, "load_before": _loadavg()}
        record["wall"] = time_commands({w: [*_sagaway(), *a] for w, a in commands.items()}, runs)
        record["load_after"] = _loadavg()
        if importtime:
            record["imports"] = {w: import_times(a, importtime) for w, a in commands.items()}
        if postgres is not None:
            _fresh_schema(urls["postgres"])
    return record


def print_record(record: dict[str, Any]) -> None:
    print(f"{record['runs']} runs each, {record['rows']} workflows in each database")
    print(f"load average before {record['load_before']}, after {record['load_after']}")
    print(f"{'command':<20} {'median ms':>10} {'p90 ms':>8} {'CPU ms':>8} {'min CPU':>8}  goal")
    for what, r in record["wall"].items():
        backend = what.rsplit(" ", 1)[-1]
        goal = GOAL_MS.get(backend)
        check = (
            "" if goal is None else f"≤ {goal:.0f}: {'met' if r['median_ms'] <= goal else 'MISSED'}"
        )
        print(
            f"{what:<20} {r['median_ms']:>10.1f} {r['p90_ms']:>8.1f} {r['cpu_median_ms']:>8.1f}"
            f" {r.get('cpu_min_ms', 0):>8.1f}  {check}"
        )
    for what, r in record.get("imports", {}).items():
        top = ", ".join(f"{name} {ms:.0f}" for name, ms in list(r["top"].items())[:6])
        print(
            f"imports of {what:<18} median {r['imports_median_ms']:>7.1f} ms, min "
            f"{r.get('imports_min_ms', 0):>6.1f} ms  (min of each: {top})"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20, help="timed runs per command")
    parser.add_argument(
        "--postgres",
        default=os.environ.get(
            "SAGAWAY_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
        ),
        help=f"PostgreSQL URL (schema {SCHEMA} is made afresh and dropped after)",
    )
    parser.add_argument("--no-postgres", action="store_true", help="SQLite only")
    parser.add_argument(
        "--importtime", type=int, default=5, metavar="N", help="-X importtime runs (0: none)"
    )
    parser.add_argument("--json", type=Path, help="also write the record to this file")
    args = parser.parse_args()
    record = measure(args.runs, None if args.no_postgres else args.postgres, args.importtime)
    print_record(record)
    if args.json is not None:
        args.json.write_text(json.dumps(record, indent=2) + "\n")


if __name__ == "__main__":
    main()
