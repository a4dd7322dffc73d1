"""How Sagaway's reading commands and its recovery scan fare on a store with a long history.

    .venv/bin/python -m benchmarks.history --db sqlite --preload 1000000

Preloads N ended workflows (``benchmarks.preload``) into a fresh store, then times:

* ``sagaway list --status FAILED``, ``sagaway list --name NAME`` (first page each) and
  ``sagaway show KEY`` as subprocesses, median of 5, minus the median of 5 runs of
  ``sagaway --help`` (the interpreter, imports and CLI start-up every command pays);
* on PostgreSQL, the floor under those three: a process that has imported what ``sagaway
  --help`` imports, then imports psycopg, opens one connection and runs ``SELECT 1`` (the
  time of that part, median of 5): no reading command can take less beyond the CLI's start;
* the Recovery Worker's scan for due executions and expired leases, ``Store.claim_due`` (and
  ``Store.next_due``, which it calls when the scan finds nothing), called directly on the
  store, median of 20.

``probe(url, sample)`` is what ``benchmarks.run --preload N`` calls after the preload, before the
scenario; its figures go into the scenario's record under ``history``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from sagaway.store import open_store
from sagaway.store.postgres.url import parse_postgres_url

CLI_RUNS = 5
SCAN_RUNS = 20
CLI_GOAL_MS = 50.0
"""list/show: at most this many ms beyond the CLI's own start."""
SCAN_GOAL_MS = 10.0
"""The recovery scan on a store with a long history."""


# As an operator's installed Sagaway runs: its modules compiled to bytecode once (pip does it at
# install), not compiled again by every command (PYTHONDONTWRITEBYTECODE, if set here, would
# make each run compile every module it imports).
_CLI_ENV = {
    **{k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"},
    "NO_COLOR": "1",
}


def _run_cli(args: list[str]) -> tuple[float, float]:
    """(wall ms, CPU ms from ``wait4()``) of one ``python -m sagaway ARGS``, which must exit 0."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "sagaway", *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=_CLI_ENV,
    )
    assert proc.stderr is not None
    err = proc.stderr.read()  # small: nothing but errors and the next-page hint
    _, status, usage = os.wait4(proc.pid, 0)
    wall = (time.perf_counter() - t0) * 1000
    proc.returncode = code = os.waitstatus_to_exitcode(status)
    if code != 0:
        raise RuntimeError(f"sagaway {' '.join(args)}: exit {code}: {err.decode()[-2000:]}")
    return wall, (usage.ru_utime + usage.ru_stime) * 1000


def _time_cli(commands: dict[str, list[str]], runs: int = CLI_RUNS) -> dict[str, Any]:
    """Median wall and CPU ms of each command; the commands take turns, run after run, so a
    change in the machine's load meanwhile hits them alike."""
    walls: dict[str, list[float]] = {what: [] for what in commands}
    cpus: dict[str, list[float]] = {what: [] for what in commands}
    for args in commands.values():  # not timed: writes the bytecode, warms the caches
        _run_cli(args)
    for _ in range(runs):
        for what, args in commands.items():
            wall, cpu = _run_cli(args)
            walls[what].append(wall)
            cpus[what].append(cpu)
    return {
        what: {
            "median_ms": statistics.median(walls[what]),
            "cpu_median_ms": statistics.median(cpus[what]),
            "runs_ms": [round(t, 1) for t in walls[what]],
        }
        for what in commands
    }


_DRIVER_FLOOR = """
import sys, time
import sagaway.cli.main  # what every command, --help included, has imported
t0, c0 = time.perf_counter(), time.process_time()
import psycopg
with psycopg.connect(sys.argv[1], autocommit=True) as conn:
    conn.execute("SELECT 1").fetchone()
print((time.perf_counter() - t0) * 1000, (time.process_time() - c0) * 1000)
"""


def _driver_floor(url: str, runs: int = CLI_RUNS) -> dict[str, Any]:
    """Median wall and CPU ms of importing psycopg, connecting and ``SELECT 1`` in a process that
    has the CLI's own imports already: the part of a reading command Sagaway cannot remove."""
    conninfo = parse_postgres_url(url)[0]
    walls, cpus = [], []
    for run in range(runs + 1):  # the first is not timed: writes the bytecode, warms the caches
        out = subprocess.run(
            [sys.executable, "-c", _DRIVER_FLOOR, conninfo],
            env=_CLI_ENV,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        if run:
            walls.append(float(out[0]))
            cpus.append(float(out[1]))
    return {"median_ms": statistics.median(walls), "cpu_median_ms": statistics.median(cpus)}


async def _scan(url: str, runs: int = SCAN_RUNS) -> dict[str, Any]:
    """Median ms of the recovery scan's store calls, as a Recovery Worker with free slots makes
    them (limit 100, nothing excluded, any queue and version)."""
    store = open_store(url)
    await store.open()
    try:
        claim, due = [], []
        for _ in range(runs):
            t0 = time.perf_counter()
            claimed = await store.claim_due(
                owner="history-probe",
                now=time.time(),
                lease_timeout=5.0,
                limit=100,
                exclude=(),
            )
            t1 = time.perf_counter()
            await store.next_due(owner="history-probe")
            t2 = time.perf_counter()
            claim.append((t1 - t0) * 1000)
            due.append((t2 - t1) * 1000)
            if claimed:
                raise RuntimeError(f"the probe claimed {len(claimed)} executions of a history")
    finally:
        await store.close()
    return {
        "claim_due_ms": statistics.median(claim),
        "next_due_ms": statistics.median(due),
        "runs": runs,
    }


def probe(url: str, sample: dict[str, str]) -> dict[str, Any]:
    """The history probes on the store at ``url`` (preloaded; ``sample`` from
    ``benchmarks.preload.sample``)."""
    timed = _time_cli(
        {
            "start": ["--help"],
            "list_status": ["list", "--db", url, "--status", sample["status"]],
            "list_name": ["list", "--db", url, "--name", sample["name"]],
            "show": ["show", "--db", url, sample["key"]],
        }
    )
    base = timed.pop("start")
    cli: dict[str, Any] = {
        "interpreter_start_ms": base["median_ms"],
        "interpreter_start_cpu_ms": base["cpu_median_ms"],
    }
    for what, t in timed.items():
        cli[what] = {
            **t,
            "beyond_start_ms": t["median_ms"] - base["median_ms"],
            "cpu_beyond_start_ms": t["cpu_median_ms"] - base["cpu_median_ms"],
        }
    if url.startswith(("postgresql:", "postgres:")):
        cli["driver_floor"] = _driver_floor(url)
    return {"cli": cli, "scan": asyncio.run(_scan(url)), "loadavg": os.getloadavg()}


def goal_lines(history: dict[str, Any], label: str = "") -> list[str]:
    """Value vs goal, MET or MISSED, for each probe."""
    lines = []
    prefix = f"{label}: " if label else ""
    for what in ("list_status", "list_name", "show"):
        value = history["cli"][what]["beyond_start_ms"]
        cpu = history["cli"][what].get("cpu_beyond_start_ms", float("nan"))
        verdict = "MET" if value < CLI_GOAL_MS else "MISSED"
        lines.append(
            f"{prefix}{what} {value:.1f} ms beyond start (CPU {cpu:.1f} ms); "
            f"goal < {CLI_GOAL_MS:g}: {verdict}"
        )
    floor = history["cli"].get("driver_floor")
    if floor:
        lines.append(
            f"{prefix}of which psycopg's import, one connection and SELECT 1 (the floor): "
            f"{floor['median_ms']:.1f} ms (CPU {floor['cpu_median_ms']:.1f} ms)"
        )
    scan = history["scan"]["claim_due_ms"]
    verdict = "MET" if scan < SCAN_GOAL_MS else "MISSED"
    lines.append(
        f"{prefix}lease scan (claim_due) {scan:.2f} ms (next_due "
        f"{history['scan']['next_due_ms']:.2f} ms); goal < {SCAN_GOAL_MS:g}: {verdict}"
    )
    return lines


def main() -> None:
    from benchmarks import orchestrate, preload

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--preload", type=int, default=100_000, metavar="N")
    parser.add_argument("--json", metavar="PATH", help="write the figures as JSON")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-history-") as tmp:
        if args.db == "sqlite":
            url = f"sqlite:///{Path(tmp) / 'engine.db'}"
        else:
            orchestrate.ensure_bench_database()
            schema = "bench_history"
            orchestrate.drop_schemas(schema)
            url = f"{orchestrate.BENCH_PG_URL}?schema={schema}"
        try:
            loaded = preload.preload(url, args.preload)
            print(f"preloaded {args.preload} workflows in {loaded['load_s']:.1f} s", flush=True)
            history = probe(url, loaded["sample"])
        finally:
            if args.db == "postgres":
                orchestrate.drop_schemas(schema)
    for line in goal_lines(history, args.db):
        print(line)
    if args.json:
        Path(args.json).write_text(json.dumps({"preload": loaded, "history": history}, indent=2))


if __name__ == "__main__":
    main()
