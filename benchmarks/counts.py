"""Counts of the A_thr workload that do not depend on the machine's load, over every thread.

Runs A_thr in-process on SQLite (20 warm-up workflows, then N measured with 100 clients, as
``benchmarks.profile``) and counts, for the measured part only, one of:

* ``sql``: every statement SQLite runs on every ``sqlite3`` connection (trace callback,
  literals normalised to ``?``), the virtual-machine steps of each (a progress handler called
  every step, attributed to the statement traced last on its connection), and the SQL texts
  handed to ``execute`` with a simulation of each connection's 128-entry statement cache;
* ``calls``: Python and C function calls and own CPU time per function, by a cProfile in
  every thread (``threading.setprofile`` starts one in each new thread; the timer is the
  thread's CPU time);
* ``ops``: Python bytecodes executed per function (``sys.settrace`` with opcode events);
* ``threads``: nothing traced; each thread's CPU time (``/proc``'s schedstat) and context
  switches, summed by thread name (load-dependent: for A/Bs in turn, not for one run).

Run it from the root of the tree to measure, with that tree's interpreter (it imports the
tree's ``benchmarks`` and ``sagaway``), at two N so that fixed costs cancel, then diff::

    cd TREE && .venv/bin/python /path/to/benchmarks/counts.py run --mode sql --n 500 --out a.json
    cd TREE && .venv/bin/python /path/to/benchmarks/counts.py run --mode sql --n 1000 --out b.json
    python benchmarks/counts.py diff OLD500.json OLD1000.json NEW500.json NEW1000.json

Work done on timers (the lease heartbeat every lease_timeout/3, polls, the WAL checkpoint
thread) grows with the run's wall time, not with N: it shows as per-workflow work, the more
so the slower the run (``calls`` and ``ops`` slow it 2-30 times). Own times in ``calls`` are
thread CPU time under a profiler and vary by 20 % between runs; the counts agree within 1 %.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import gc
import json
import os
import re
import sqlite3
import sys
import tempfile
import threading
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import cProfile

RECORDING = False  # set for the measured part only

# ---------------------------------------------------------------- sql

_LITERAL = re.compile(
    r"'(?:[^']|'')*'|[xX]'[0-9a-fA-F]*'|(?<![\w.])-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?(?![\w])"
)
_NULL = re.compile(r"(?<!IS )(?<!IS NOT )(?<!NOT )\bNULL\b")  # a bound None, expanded
_SPACE = re.compile(r"\s+")
_CACHE = 128  # sqlite3.connect's cached_statements default


def normalise(sql: str) -> str:
    """The expanded SQL of the trace callback with its bound values as ``?``."""
    return _SPACE.sub(" ", _NULL.sub("?", _LITERAL.sub("?", sql))).strip()


class _Conn:
    def __init__(self, label: str) -> None:
        self.label = label
        self.traced: collections.Counter[str] = collections.Counter()
        self.steps: collections.Counter[str] = collections.Counter()
        self.texts: collections.Counter[str] = collections.Counter()
        self.current = "<none>"
        self.cache: collections.OrderedDict[str, None] = collections.OrderedDict()
        self.distinct = 0
        self.misses = 0


_CONNS: list[_Conn] = []
_connect = sqlite3.connect


def _handed(stats: _Conn, sql: str) -> None:
    if sql in stats.cache:
        stats.cache.move_to_end(sql)
    else:
        stats.distinct += 1
        stats.misses += RECORDING
        stats.cache[sql] = None
        if len(stats.cache) > _CACHE:
            stats.cache.popitem(last=False)
    if RECORDING:
        stats.texts[_SPACE.sub(" ", sql).strip()] += 1


class _CountingConnection(sqlite3.Connection):
    stats: _Conn

    def execute(self, sql: str, *args: Any) -> sqlite3.Cursor:  # type: ignore[override]
        _handed(self.stats, sql)
        return super().execute(sql, *args)

    def executemany(self, sql: str, *args: Any) -> sqlite3.Cursor:  # type: ignore[override]
        _handed(self.stats, sql)
        return super().executemany(sql, *args)


def _counting_connect(database: Any, *args: Any, **kwargs: Any) -> sqlite3.Connection:
    conn = _connect(database, *args, factory=_CountingConnection, **kwargs)
    name = os.path.basename(str(database).split("?")[0])
    thread = threading.current_thread().name.split(":")[0]
    stats = _Conn(f"{name}#{sum(c.label.startswith(name + '#') for c in _CONNS)}@{thread}")
    _CONNS.append(stats)
    conn.stats = stats  # type: ignore[attr-defined]

    def trace(sql: str) -> None:
        stats.current = normalise(sql)
        if RECORDING:
            stats.traced[stats.current] += 1

    def progress() -> int:
        if RECORDING:
            stats.steps[stats.current] += 1
        return 0

    conn.set_trace_callback(trace)
    conn.set_progress_handler(progress, 1)
    return conn


def _sql_result() -> dict[str, Any]:
    return {
        c.label: {
            "traced": dict(c.traced),
            "steps": dict(c.steps),
            "texts": dict(c.texts),
            "distinct_texts": c.distinct,
            "cache_misses": c.misses,
        }
        for c in _CONNS
    }


# ---------------------------------------------------------------- calls

_PROFILERS: list[cProfile.Profile] = []


def _new_profiler() -> cProfile.Profile:
    import cProfile  # not at the top: run() first drops this file's folder from sys.path

    prof = cProfile.Profile(time.thread_time_ns, 1e-9)
    _PROFILERS.append(prof)
    return prof


def _first_event(frame: Any, event: str, arg: Any) -> None:
    _new_profiler().enable()  # replaces this hook in the new thread


def _where(code: Any) -> str:
    if isinstance(code, str):
        return code
    return f"{code.co_filename}:{code.co_firstlineno}:{code.co_name}"


def _calls_now() -> dict[str, list[float]]:
    """{function: [calls, own seconds]} over every thread's profiler."""
    # getstats walks a tree of entries that Python code run meanwhile (a finaliser called by
    # the GC, or another thread given the GIL by one) reshapes: entries go missing, counts
    # come out negative. No GC while the raw lists are taken.
    gc.disable()
    try:
        raw = [prof.getstats() for prof in list(_PROFILERS)]
    finally:
        gc.enable()
    out: dict[str, list[float]] = collections.defaultdict(lambda: [0, 0.0])
    for stats in raw:
        for entry in stats:
            row = out[_where(entry.code)]
            row[0] += entry.callcount
            row[1] += entry.inlinetime
    return dict(out)


# ---------------------------------------------------------------- ops

_OPS: dict[int, dict[Any, int]] = {}


def _op_call(frame: Any, event: str, arg: Any) -> Any:
    if event != "call":
        return None
    frame.f_trace_opcodes = True
    frame.f_trace_lines = False
    code = frame.f_code
    counts = _OPS.setdefault(threading.get_ident(), {})

    def local(frame: Any, event: str, arg: Any) -> Any:
        if event == "opcode" and RECORDING:
            counts[code] = counts.get(code, 0) + 1
        return local

    return local


def _ops_result() -> dict[str, int]:
    out: collections.Counter[str] = collections.Counter()
    for counts in list(_OPS.values()):
        for code, n in list(counts.items()):
            out[_where(code)] += n
    return dict(out)


# ---------------------------------------------------------------- threads


def _threads_now() -> dict[str, list[int]]:
    """{thread: [CPU ns, voluntary, involuntary context switches]} of this process."""
    names = {t.native_id: t.name.split(":")[0] for t in threading.enumerate()}
    out: dict[str, list[int]] = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/schedstat") as f:
                cpu_ns = int(f.read().split()[0])
            with open(f"/proc/self/task/{tid}/status") as f:
                status = f.read()
        except FileNotFoundError:  # ended meanwhile
            continue
        switches = re.findall(r"^(?:non)?voluntary_ctxt_switches:\s+(\d+)", status, re.M)
        out[f"{names.get(int(tid), '?')}/{tid}"] = [cpu_ns, *map(int, switches)]
    return out


# ---------------------------------------------------------------- run


async def _workload(n: int, clients: int, mode: str) -> dict[str, Any]:
    global RECORDING
    from benchmarks import workload
    from benchmarks.sagaway_adapter import SagawayAdapter

    with tempfile.TemporaryDirectory(prefix="sagaway-counts-") as tmp:
        services = workload.Services({"kind": "sqlite", "dir": f"{tmp}/services"})
        services.create()
        config = {"url": f"sqlite:///{tmp}/engine.db", "activities": "async", "telemetry": "off"}
        adapter = SagawayAdapter(config, services)
        await adapter.open()

        async def client(ids: list[str]) -> None:
            while ids:
                result = await adapter.result(await adapter.start(ids.pop(), None))
                if result != workload.expected_result(None):
                    raise AssertionError(result)

        try:
            warm = [f"warm-{i}" for i in range(20)]
            await asyncio.gather(*(client(warm) for _ in range(20)))
            ids = [f"wf-{i:06d}" for i in range(n)]
            before = _calls_now() if mode == "calls" else {}
            threads_before = _threads_now()
            RECORDING = True
            started = time.perf_counter()
            await asyncio.gather(*(client(ids) for _ in range(clients)))
            wall = time.perf_counter() - started
            RECORDING = False
            threads_after = _threads_now()
            after = _calls_now() if mode == "calls" else {}
        finally:
            await adapter.close()
            services.close()
    result: dict[str, Any] = {"n": n, "clients": clients, "mode": mode, "wall_s": wall}
    threads: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0, 0])
    for key, now in threads_after.items():
        name = key.split("/")[0].rstrip("0123456789_-")  # asyncio_0 .. asyncio_5: asyncio
        for i, (a, b) in enumerate(zip(threads_before.get(key, [0, 0, 0]), now, strict=True)):
            threads[name][i] += b - a
    result["threads"] = dict(threads)
    if mode == "sql":
        result["sql"] = _sql_result()
    elif mode == "ops":
        result["ops"] = _ops_result()
    elif mode == "calls":
        zero = [0, 0.0]
        result["calls"] = {
            k: [v[0] - before.get(k, zero)[0], v[1] - before.get(k, zero)[1]]
            for k, v in after.items()
            if v[0] != before.get(k, zero)[0]
        }
    return result


def run(args: argparse.Namespace) -> None:
    # Run as a file, its folder comes first on sys.path and its profile.py hides the standard
    # library's (which cProfile imports); the measured tree's root goes there instead.
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [os.getcwd(), *(p for p in sys.path if os.path.abspath(p or ".") != here)]
    if args.mode == "sql":
        sqlite3.connect = _counting_connect  # type: ignore[assignment]
    elif args.mode == "ops":
        threading.settrace(_op_call)
        sys.settrace(_op_call)
    elif args.mode == "calls":
        threading.setprofile(_first_event)
        _new_profiler().enable()
    result = asyncio.run(_workload(args.n, args.clients, args.mode))
    sys.settrace(None)
    sys.setprofile(None)
    with open(args.out, "w") as f:
        json.dump(result, f)
    threads = ", ".join(
        f"{name} {cpu / args.n / 1e3:.0f} us {vol / args.n:.2f}/{invol / args.n:.2f}"
        for name, (cpu, vol, invol) in result["threads"].items()
    )
    print(
        f"{args.mode} N={args.n}: {args.n / result['wall_s']:.1f} wf/s -> {args.out}; per "
        f"workflow, each thread's CPU and (in)voluntary context switches: {threads}"
    )


# ---------------------------------------------------------------- diff


def _short(where: str) -> str:
    where = re.sub(r"^/work/wt/[^/]+/|^.*?/(?=src/sagaway/)", "", where)
    where = re.sub(r"^.*/site-packages/", "", where)
    where = re.sub(r"^.*/lib/python3\.\d+/", "", where)
    return re.sub(r":\d+:", ":", where)  # lines move between trees


def _flat(doc: dict[str, Any]) -> dict[str, collections.Counter[str]]:
    """{measure: {key: count}} of one run."""
    out: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    for thread, (cpu_ns, vol, invol) in doc.get("threads", {}).items():
        out["thread_cpu_us"][thread] += cpu_ns / 1e3
        out["context_switches"][f"{thread} voluntary"] += vol
        out["context_switches"][f"{thread} involuntary"] += invol
    if doc["mode"] == "sql":
        for label, conn in doc["sql"].items():
            role = "engine" if label.startswith("engine.db#0") else label.split("#")[0]
            if label.startswith("engine.db#") and not label.startswith("engine.db#0"):
                role = "engine-other"
            for what in ("traced", "steps"):
                for stmt, n in conn[what].items():
                    out[what][f"[{role}] {stmt}"] += n
    elif doc["mode"] == "ops":
        for where, n in doc["ops"].items():
            out["ops"][_short(where)] += n
    elif doc["mode"] == "calls":
        for where, (n, own) in doc["calls"].items():
            out["calls"][_short(where)] += n
            out["own_us"][_short(where)] += own * 1e6
    return out


def _per_workflow(small: dict[str, Any], big: dict[str, Any]) -> dict[str, dict[str, float]]:
    a, b, span = _flat(small), _flat(big), big["n"] - small["n"]
    return {
        what: {k: (b[what][k] - a[what].get(k, 0)) / span for k in set(a[what]) | set(b[what])}
        for what in b
    }


def diff(args: argparse.Namespace) -> None:
    docs = []
    for path in args.files:
        with open(path) as f:
            docs.append(json.load(f))
    old, new = _per_workflow(docs[0], docs[1]), _per_workflow(docs[2], docs[3])
    for what in new:
        o, n = old.get(what, {}), new[what]
        print(f"\n{what} per workflow: old {sum(o.values()):.1f}, new {sum(n.values()):.1f}")
        keys = sorted(set(o) | set(n), key=lambda k: -abs(n.get(k, 0) - o.get(k, 0)))
        for k in keys[: args.top]:
            a, b = o.get(k, 0.0), n.get(k, 0.0)
            print(f"  {a:9.2f} -> {b:9.2f} ({b - a:+9.2f})  {k[:140]}")
    for label, doc in (("old", docs[1]), ("new", docs[3])):
        for conn, stats in doc.get("sql", {}).items():
            if conn.startswith("engine.db"):
                print(
                    f"  {label} {conn}: {stats['distinct_texts']} distinct SQL texts, "
                    f"{stats['cache_misses']} statement-cache misses in the measured part"
                )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p_run = sub.add_parser("run", help="count one run (from the measured tree's root)")
    p_run.add_argument("--mode", choices=("sql", "calls", "ops", "threads"), required=True)
    p_run.add_argument("--n", type=int, required=True)
    p_run.add_argument("--clients", type=int, default=100)
    p_run.add_argument("--out", required=True)
    p_diff = sub.add_parser("diff", help="per-workflow differences of two trees")
    p_diff.add_argument("files", nargs=4, metavar="JSON", help="old N1, old N2, new N1, new N2")
    p_diff.add_argument("--top", type=int, default=15)
    args = parser.parse_args(argv)
    (run if args.command == "run" else diff)(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
