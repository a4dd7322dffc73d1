"""Orchestration shared by ``benchmarks.run`` and ``benchmarks.compare``.

Runs each scenario in a fresh ``benchmarks.scenario`` subprocess, with fresh engine state and
fresh service tables; measures the process's CPU and peak RSS with ``wait4()``, the external
servers' CPU from ``/proc``, and runs scenario C (crash recovery) with its SIGKILL.

External servers (``benchmarks/WORKLOAD.md`` §4):

* Temporal dev server: ``/proc/<pid>/stat`` utime+stime delta over the scenario's processes'
  lifetime; peak RSS = its ``VmHWM`` (since the server started, a fresh server per scenario).
* PostgreSQL: the whole cluster's CPU, i.e. the postmaster's own utime+stime plus its
  cutime+cstime (every reaped child: backends of closed connections, autovacuum workers) plus
  utime+stime+cutime+cstime of its live children, delta over the same window. That includes
  other clients of the same server (anything else running on it at the time). As a
  cross-check, the backends of the ``bench`` database alone are sampled every 0.1 s (live
  backends found through ``/proc``; a backend's last 0.1 s before it exits can be missed).
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks import workload
from benchmarks.workload import RowCounter

REPO = Path(__file__).resolve().parent.parent

SCENARIOS: dict[str, dict[str, Any]] = {
    "A_seq": {"n": 200, "clients": 1, "fail_step": None},
    "A_thr": {"n": 1000, "clients": 100, "fail_step": None},
    "B_thr": {"n": 500, "clients": 100, "fail_step": workload.FAIL_STEP},
    "C": {"n": 200, "clients": 0, "fail_step": None},
}
QUICK_N = {"A_seq": 20, "A_thr": 100, "B_thr": 50, "C": 40}
QUICK_WARMUP = 5
CRASH_FRACTION = 0.25
"""Scenario C: SIGKILL once this fraction of the sagas has written ``arrange_shipping``."""

BENCH_PG_URL = os.environ.get("BENCH_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/bench")
"""The benchmark database (created if missing): engine schemas and ``svc_<service>`` schemas."""

PG_SCHEMAS = {
    "sagaway": "bench_sagaway",
    "dbos": "bench_dbos",
    "checkpoint": "bench_ckpt",
    "sayiir": "bench_sayiir",
}
"""Engine state schemas in the bench database, dropped before every scenario."""

CLK_TCK = os.sysconf("SC_CLK_TCK")


class Unavailable(Exception):
    """An engine or backend cannot be used here (missing package, no server...)."""


@dataclasses.dataclass(frozen=True)
class Target:
    """One engine on one backend."""

    key: str
    engine: str  # sagaway | dbos | temporal | sayiir | absurd | none | checkpoint
    backend: str  # sqlite | sqlite-wal | postgres | dev-server | grpc+sqlite | grpc+postgres
    label: str
    crash: bool = True
    workers: int = 0
    """> 0: Sagaway only, that many ``python -m sagaway worker`` processes; client only here."""
    options: tuple[tuple[str, Any], ...] = ()
    """Extra adapter config (e.g. ``activities``, ``poll_interval``)."""
    crash_skip: str = ""
    """With ``crash=False``: why scenario C is not run (printed and recorded in ``skipped``)."""
    preload: int = 0
    """Sagaway only: this many ended workflows inserted before the scenario
    (``benchmarks.preload``), then the history probes (``benchmarks.history``)."""

    @property
    def pg(self) -> bool:
        """Engine state in PostgreSQL: services are PostgreSQL schemas, the cluster CPU counts."""
        return self.backend in ("postgres", "grpc+postgres")

    @property
    def grpc(self) -> bool:
        """Sagaway through a ``sagaway server`` process (engine state behind it)."""
        return self.backend.startswith("grpc+")


# ---------------------------------------------------------------------- PostgreSQL


def _pg_url_for(db: str, url: str = BENCH_PG_URL) -> str:
    parts = urllib.parse.urlsplit(url)
    return urllib.parse.urlunsplit(parts._replace(path=f"/{db}"))


def _pg_dbname(url: str = BENCH_PG_URL) -> str:
    return urllib.parse.urlsplit(url).path.lstrip("/")


def ensure_bench_database() -> None:
    """CREATE DATABASE bench if it does not exist (trust auth on the local server)."""
    import psycopg
    from psycopg import sql

    name = _pg_dbname()
    try:
        with psycopg.connect(_pg_url_for("postgres"), autocommit=True, connect_timeout=10) as conn:
            exists = conn.execute(
                "SELECT 1 FROM pg_database WHERE datname = %s", (name,)
            ).fetchone()
            if not exists:
                conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    except Exception as exc:
        raise Unavailable(f"PostgreSQL at {BENCH_PG_URL}: {type(exc).__name__}: {exc}") from exc


def drop_schemas(*schemas: str) -> None:
    import psycopg
    from psycopg import sql

    with psycopg.connect(BENCH_PG_URL, autocommit=True, connect_timeout=10) as conn:
        for schema in schemas:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


def postmaster_pid() -> int | None:
    import psycopg

    try:
        with psycopg.connect(BENCH_PG_URL, autocommit=True, connect_timeout=10) as conn:
            row = conn.execute("SHOW data_directory").fetchone()
        assert row is not None
        text = (Path(row[0]) / "postmaster.pid").read_text()
        pid = int(text.splitlines()[0])
        Path(f"/proc/{pid}/stat").read_text()
        return pid
    except Exception:
        return None


def pg_server_version() -> str:
    import psycopg

    try:
        with psycopg.connect(BENCH_PG_URL, autocommit=True, connect_timeout=10) as conn:
            row = conn.execute("SHOW server_version").fetchone()
            return str(row[0]) if row else "?"
    except Exception as exc:
        return f"unavailable ({exc})"


# ---------------------------------------------------------------------- /proc CPU


def _stat(pid: int) -> list[str] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # comm may contain spaces: split after the closing parenthesis
    return text[text.rindex(")") + 2 :].split()


def proc_cpu(pid: int, children: bool = False) -> float | None:
    """utime+stime (+cutime+cstime) of ``pid`` in seconds."""
    fields = _stat(pid)
    if fields is None:
        return None
    # after "pid (comm) ": state=0 ppid=1 ... utime=11 stime=12 cutime=13 cstime=14
    ticks = int(fields[11]) + int(fields[12])
    if children:
        ticks += int(fields[13]) + int(fields[14])
    return ticks / CLK_TCK


def vm_hwm_mb(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def _children(ppid: int) -> list[int]:
    found: list[int] = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        fields = _stat(int(entry.name))
        if fields is not None and int(fields[1]) == ppid:
            found.append(int(entry.name))
    return found


def _cmdline(pid: int) -> str:
    try:
        return (
            Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        )
    except OSError:
        return ""


class MachineCpu:
    """Busy CPU seconds of the whole machine (all cores, ``/proc/stat``) over a window.

    ``other_cpu_s`` in the records = this minus the benchmark's own processes and servers: what
    else ran on the machine meanwhile (noise from other work on a shared host).
    """

    def __init__(self) -> None:
        self.start = self._busy()
        self.t0 = time.perf_counter()
        self.self_start = self._self_cpu()

    @staticmethod
    def _self_cpu() -> float:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return usage.ru_utime + usage.ru_stime

    @staticmethod
    def _busy() -> float:
        try:
            fields = [int(x) for x in Path("/proc/stat").read_text().split("\n")[0].split()[1:]]
        except (OSError, ValueError):
            return 0.0
        # user nice system idle iowait irq softirq steal ...
        idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
        return (sum(fields[:8]) - idle) / CLK_TCK

    def stop(self, ours: float) -> dict[str, Any]:
        busy = self._busy() - self.start
        orchestrator = self._self_cpu() - self.self_start
        return {
            "wall_s": time.perf_counter() - self.t0,
            "busy_cpu_s": busy,
            "ours_cpu_s": ours,
            "orchestrator_cpu_s": orchestrator,
            "other_cpu_s": max(0.0, busy - ours - orchestrator),
            "loadavg_end": Path("/proc/loadavg").read_text().split()[:3],
        }


def _ours(*parts: Any) -> float:
    """CPU seconds of processes (``Child.usage()`` dicts) and server monitors' records."""
    total = 0.0
    for part in parts:
        if not part:
            continue
        if "cpu_user_s" in part:
            total += (part.get("cpu_user_s") or 0.0) + (part.get("cpu_sys_s") or 0.0)
        elif "cpu_s" in part:
            total += part.get("cpu_s") or 0.0
    return total


class ServerCpu:
    """CPU seconds of one server process over a window (Temporal dev server, Sagaway server)."""

    def __init__(self, pid: int, what: str = "temporal dev server process") -> None:
        self.pid = pid
        self.what = what
        self.start = proc_cpu(pid, children=True) or 0.0

    def snapshot(self) -> float:
        """CPU seconds so far (for the measured part's boundaries)."""
        return proc_cpu(self.pid, children=True) or 0.0

    def stop(self) -> dict[str, Any]:
        end = proc_cpu(self.pid, children=True)
        return {
            "what": self.what,
            "cpu_s": None if end is None else end - self.start,
            "peak_rss_mb": vm_hwm_mb(self.pid),
        }


class PgCpu:
    """PostgreSQL cluster CPU over a window, and the ``bench`` backends' share (sampled)."""

    def __init__(self, pid: int, dbname: str) -> None:
        self.pid = pid
        self.dbname = dbname
        self.start = self._cluster()
        self._bench: dict[int, tuple[float, float]] = {}  # pid -> (first seen, last seen)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample_loop, daemon=True)
        self._thread.start()

    def snapshot(self) -> float:
        """The cluster's CPU seconds so far (for the measured part's boundaries)."""
        return self._cluster()

    def backends(self) -> dict[int, float]:
        """CPU seconds so far of each live backend of the benchmark's database (for the
        measured part: the server's work for this database alone, without other databases'
        clients on a shared server, start-up or warm-up)."""
        found = {}
        for child in _children(self.pid):
            words = _cmdline(child).split()
            if len(words) >= 4 and words[3] == self.dbname:
                cpu = proc_cpu(child)
                if cpu is not None:
                    found[child] = cpu
        return found

    def _cluster(self) -> float:
        total = proc_cpu(self.pid, children=True) or 0.0
        for child in _children(self.pid):
            total += proc_cpu(child, children=True) or 0.0
        return total

    def _sample(self) -> None:
        for child in _children(self.pid):
            words = _cmdline(child).split()
            # "postgres: 15/main: <user> <db> <host(port)> <activity>"
            if len(words) >= 4 and words[3] == self.dbname:
                cpu = proc_cpu(child)
                if cpu is None:
                    continue
                first = self._bench.get(child, (cpu, cpu))[0]
                self._bench[child] = (first, cpu)

    def _sample_loop(self) -> None:
        # backends alive at the start count from their value then, new ones from zero
        first_pass = True
        while not self._stop.is_set():
            if first_pass:
                self._sample()
                first_pass = False
            else:
                before = set(self._bench)
                self._sample()
                for pid in set(self._bench) - before:
                    self._bench[pid] = (0.0, self._bench[pid][1])
            self._stop.wait(0.1)

    def stop(self) -> dict[str, Any]:
        self._stop.set()
        self._thread.join(5)
        end = self._cluster()
        return {
            "what": "postgresql cluster (postmaster + live and reaped children)",
            "cpu_s": end - self.start,
            "bench_backends_cpu_s": sum(last - first for first, last in self._bench.values()),
            "bench_backends_seen": len(self._bench),
        }


# ---------------------------------------------------------------------- processes


class Child:
    """A ``benchmarks.scenario`` process (or a Sagaway worker): output to a log, marker times,
    CPU and peak RSS from ``wait4()``."""

    def __init__(
        self,
        cmd: list[str],
        log: Path,
        env: dict[str, str] | None = None,
        markers: tuple[str, ...] = (),
        on_marker: Callable[[str], None] | None = None,
    ) -> None:
        self.log = log
        self._on_marker = on_marker
        self.markers: dict[str, float] = {}
        self._marker_events = {m: threading.Event() for m in markers}
        self.spawn_epoch = time.time()
        self.t0 = time.perf_counter()
        self.proc = subprocess.Popen(
            cmd,
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env={**os.environ, **(env or {})},
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self.rusage: Any = None
        self.exit_code: int | None = None
        self.killed = False
        self.hwm_mb: float | None = None
        """Peak RSS (``VmHWM``) as last sampled while it ran. wait4's ru_maxrss is not used: on
        Linux it includes the RSS of the forked orchestrator image before exec."""

    def _read(self) -> None:
        assert self.proc.stdout is not None
        with self.log.open("wb") as out:
            for line in self.proc.stdout:
                out.write(line)
                out.flush()
                text = line.decode(errors="replace")
                for marker, event in self._marker_events.items():
                    if not event.is_set() and text.startswith(marker):
                        self.markers[marker] = time.time()
                        if self._on_marker is not None:
                            self._on_marker(marker)
                        event.set()

    def wait_marker(self, marker: str, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        event = self._marker_events[marker]
        while time.monotonic() < deadline:
            self.sample()
            if event.wait(0.05):
                return True
            if self.proc.poll() is not None:
                self._reader.join(2)
                return event.is_set()
        return False

    def sample(self) -> None:
        if self.exit_code is None:
            hwm = vm_hwm_mb(self.proc.pid)
            if hwm is not None:
                self.hwm_mb = max(hwm, self.hwm_mb or 0.0)

    def kill(self) -> None:
        """SIGKILL our own child, by its pid."""
        if self.exit_code is None:
            self.killed = True
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.proc.pid, signal.SIGKILL)

    def terminate(self) -> None:
        if self.exit_code is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.proc.pid, signal.SIGTERM)

    def wait(self, timeout: float) -> bool:
        """Reap with wait4(); on timeout SIGKILL it and return False."""
        deadline = time.perf_counter() + timeout
        timed_out = False
        while True:
            self.sample()
            pid, status, rusage = os.wait4(self.proc.pid, os.WNOHANG)
            if pid == self.proc.pid:
                break
            if time.perf_counter() > deadline and not timed_out:
                timed_out = True
                self.kill()
            time.sleep(0.02)
        self.elapsed = time.perf_counter() - self.t0
        self.end_epoch = time.time()
        self.exit_code = os.waitstatus_to_exitcode(status)
        self.proc.returncode = self.exit_code
        self.rusage = rusage
        self._reader.join(5)
        return not timed_out

    def usage(self) -> dict[str, Any]:
        r = self.rusage
        record: dict[str, Any] = {
            "exit_code": self.exit_code,
            "elapsed_s": getattr(self, "elapsed", None),
            "cpu_user_s": r.ru_utime if r else None,
            "cpu_sys_s": r.ru_stime if r else None,
            "peak_rss_mb": self.hwm_mb,
            "ru_maxrss_mb": r.ru_maxrss / 1024 if r else None,  # includes the forked parent
            "killed": self.killed,
        }
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        if text.strip():
            record["output_tail"] = text.splitlines()[-30:]
        return record


def scenario_cmd(spec: dict[str, Any], out: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "benchmarks.scenario",
        "--spec",
        json.dumps(spec),
        "--out",
        str(out),
    ]


# ---------------------------------------------------------------------- one target


class Prepared:
    """Fresh state for one scenario of one target: engine config, services, servers."""

    def __init__(self, target: Target, workdir: Path, activities: str) -> None:
        self.target = target
        self.workdir = workdir
        self.server: Any = None
        self.history: dict[str, Any] | None = None
        """The preload and the history probes' figures (``Target.preload``)."""
        self.services: dict[str, Any] = (
            {"kind": "postgres", "url": BENCH_PG_URL}
            if target.pg
            else {"kind": "sqlite", "dir": str(workdir / "services")}
        )
        engine, pg = target.engine, target.pg
        config: dict[str, Any] = {}
        if pg and engine in PG_SCHEMAS:
            drop_schemas(PG_SCHEMAS[engine])  # fresh engine state
        if engine == "sagaway":
            config["activities"] = activities
            config["url"] = (
                f"{BENCH_PG_URL}?schema={PG_SCHEMAS['sagaway']}"
                if pg
                else f"sqlite:///{workdir / 'engine.db'}"
            )
            if target.preload:
                self.history = preload_and_probe(config["url"], target.preload)
            if target.grpc:
                from benchmarks.sagaway_server import EngineServer

                self.server = EngineServer(config["url"], workdir)
                self.server.start()
                config["url"] = self.server.url
                config["token"] = self.server.token
        elif engine == "dbos":
            if pg:
                config.update(url=BENCH_PG_URL, schema=PG_SCHEMAS["dbos"])
            else:
                config["url"] = f"sqlite:///{workdir / 'dbos.sqlite'}"
                config["journal"] = "wal" if target.backend == "sqlite-wal" else "default"
        elif engine == "temporal":
            from benchmarks.temporal_adapter import TemporalServer

            self.server = TemporalServer(workdir)
            self.server.start()
            config["address"] = self.server.address
        elif engine == "sayiir":
            config.update(url=BENCH_PG_URL, schema=PG_SCHEMAS["sayiir"])
        elif engine == "absurd":
            from benchmarks import absurd_adapter

            config["url"] = _pg_url_for(absurd_adapter.database_for(_pg_dbname()))
            absurd_adapter.reset_database(_pg_url_for("postgres"), config["url"])
        elif engine == "checkpoint":
            if pg:
                config.update(kind="postgres", url=BENCH_PG_URL, schema=PG_SCHEMAS["checkpoint"])
            else:
                config.update(kind="sqlite", path=str(workdir / "engine.db"))
        config.update(dict(target.options))
        self.engine_config = config

    def monitors(self) -> list[Any]:
        found: list[Any] = []
        if self.server is not None:
            what = "sagaway server process" if self.target.grpc else "temporal dev server process"
            found.append(ServerCpu(self.server.pid, what))
        if self.target.pg:
            pid = postmaster_pid()
            if pid is not None:
                found.append(PgCpu(pid, _pg_dbname()))
        return found

    def server_info(self) -> dict[str, Any] | None:
        return None if self.server is None else self.server.describe()

    def close(self) -> None:
        if self.server is not None:
            self.server.stop()
            self.server = None


def preload_and_probe(url: str, n: int) -> dict[str, Any]:
    """Insert ``n`` ended workflows into the (fresh) store at ``url``, then run the history
    probes on it; both records."""
    from benchmarks import history, preload

    loaded = preload.preload(url, n)
    print(f"    preloaded {n} workflows in {loaded['load_s']:.1f} s; probing", flush=True)
    return {"preload": loaded, "history": history.probe(url, loaded["sample"])}


class MeasuredCpu:
    """CPU of the worker processes and external servers between the scenario process's
    ``MEASURE_BEGIN`` and ``MEASURE_END`` lines (the measured part, without start-up and
    warm-up); the scenario process reports its own CPU over the same part."""

    MARKERS = ("MEASURE_BEGIN", "MEASURE_END")

    def __init__(self, workers: list[Child], monitors: list[Any]) -> None:
        self.workers = workers
        self.monitors = monitors
        self.at: dict[str, tuple[float, float]] = {}
        self.backends: dict[str, dict[int, float]] = {}
        """CPU of each backend of the benchmark's database at each marker (PostgreSQL)."""

    def __call__(self, marker: str) -> None:
        # The database's backends first: after MEASURE_END the scenario closes its pools.
        for m in self.monitors:
            if isinstance(m, PgCpu):
                self.backends[marker] = m.backends()
        worker_s = sum(proc_cpu(w.proc.pid) or 0.0 for w in self.workers)
        server_s = sum(m.snapshot() for m in self.monitors)
        self.at[marker] = (worker_s, server_s)

    def record(self, client_s: float | None, n: int) -> dict[str, Any] | None:
        if client_s is None or len(self.at) < 2:
            return None
        (w0, s0), (w1, s1) = self.at["MEASURE_BEGIN"], self.at["MEASURE_END"]
        total = client_s + (w1 - w0) + (s1 - s0)
        return {
            "client_s": client_s,
            "workers_s": w1 - w0,
            "servers_s": s1 - s0,
            "total_s": total,
            "per_wf_ms": 1000 * total / n if n else None,
            **db_backends(self.backends, n),
        }


def db_backends(at: dict[str, dict[int, float]], n: int) -> dict[str, Any]:
    """The benchmark database's backends' CPU over the measured part: each backend's CPU at
    ``MEASURE_END`` minus its CPU at ``MEASURE_BEGIN`` (0 if it connected later); one that
    disconnected in between is not counted (connection pools keep theirs)."""
    if len(at) < 2:
        return {}
    begin, end = at["MEASURE_BEGIN"], at["MEASURE_END"]
    cpu = sum(v - begin.get(pid, 0.0) for pid, v in end.items())
    return {
        "db_backends_s": cpu,
        "db_backends_per_wf_ms": 1000 * cpu / n if n else None,
        "db_backends_lost": len(set(begin) - set(end)),
    }


def _external(monitors: list[Any]) -> list[dict[str, Any]]:
    return [m.stop() for m in monitors]


def _load(out: Path) -> dict[str, Any]:
    try:
        loaded: dict[str, Any] = json.loads(out.read_text())
        return loaded
    except (OSError, ValueError):
        return {}


def _start_workers(prepared: Prepared, count: int, timeout: float = 60.0) -> list[Child]:
    env = {
        "BENCH_SAGAWAY_CONFIG": json.dumps(prepared.engine_config),
        "BENCH_SERVICES": json.dumps(prepared.services),
        "BENCH_SVC_POOL_SIZE": os.environ.get("BENCH_WORKER_SVC_POOL_SIZE", "4"),
    }
    workers = []
    for i in range(count):
        cmd = [sys.executable, "-m", "sagaway", "worker", "benchmarks.sagaway_worker_app:manager"]
        workers.append(
            Child(cmd, prepared.workdir / f"worker-{i}.log", env=env, markers=("sagaway worker:",))
        )
    for w in workers:
        if not w.wait_marker("sagaway worker:", timeout):
            for other in workers:
                other.kill()
                other.wait(10)
            raise RuntimeError(
                f"a sagaway worker did not start: {w.log.read_text(errors='replace')[-2000:]}"
            )
    return workers


def run_scenario(
    target: Target,
    name: str,
    *,
    quick: bool = False,
    activities: str = "async",
    timeout: float = 900.0,
    keep: bool = False,
    route: Any = None,
) -> dict[str, Any]:
    """Scenario A_seq, A_thr or B_thr of ``target`` in a fresh process; the record.

    ``route`` (``benchmarks.network``): the scenario process reaches PostgreSQL another way:
    ``route.spec(spec)`` rewrites its URLs, ``route.command(cmd)`` wraps its command (e.g.
    ``ip netns exec``), ``route.monitors()`` adds CPU monitors (the forwarder)."""
    if name == "C":
        return run_crash(target, quick=quick, activities=activities, timeout=timeout, keep=keep)
    base = SCENARIOS[name]
    workdir = Path(tempfile.mkdtemp(prefix=f"bench-{target.key.replace('/', '-')}-{name}-"))
    prepared: Prepared | None = None
    workers: list[Child] = []
    try:
        prepared = Prepared(target, workdir, activities)
        engine_config = dict(prepared.engine_config)
        if target.workers:
            engine_config["client_only"] = True
        spec = {
            "mode": "run",
            "scenario": name,
            "engine": target.engine,
            "engine_config": engine_config,
            "services": prepared.services,
            "n": QUICK_N[name] if quick else base["n"],
            "clients": base["clients"],
            "warmup": QUICK_WARMUP if quick else workload.WARMUP,
            "fail_step": base["fail_step"],
        }
        if route is not None:
            spec = route.spec(spec)
        machine_cpu = MachineCpu()
        workers = _start_workers(prepared, target.workers) if target.workers else []
        monitors = prepared.monitors() + (route.monitors() if route is not None else [])
        measured = MeasuredCpu(workers, monitors)
        out = workdir / "result.json"
        cmd = scenario_cmd(spec, out)
        child = Child(
            route.command(cmd) if route is not None else cmd,
            workdir / "output.log",
            markers=MeasuredCpu.MARKERS,
            on_marker=measured,
        )
        finished = child.wait(timeout)
        for w in workers:
            w.sample()
            w.terminate()
        for w in workers:
            w.wait(60)
        external = _external(monitors)
        record = _load(out)
        if not finished:
            record["failed"] = f"timed out after {timeout:.0f}s (killed)"
        elif child.exit_code != 0 and "failed" not in record:
            record["failed"] = f"exit code {child.exit_code}"
        record["process"] = child.usage()
        if workers:
            record["worker_processes"] = [w.usage() for w in workers]
        record["external"] = external
        record["machine_cpu"] = machine_cpu.stop(
            _ours(record["process"], *record.get("worker_processes", []), *external)
        )
        record["server"] = prepared.server_info()
        record["measured_cpu"] = measured.record(record.get("measured_client_cpu_s"), spec["n"])
        if prepared.history is not None:
            record.update(prepared.history)
    except Exception as exc:
        record = {"scenario": name, "failed": f"{type(exc).__name__}: {exc}"}
        for w in workers:
            w.kill()
            w.wait(30)
    finally:
        if prepared is not None:
            prepared.close()
        if not keep:
            shutil.rmtree(workdir, ignore_errors=True)
    record["workdir"] = str(workdir) if keep else None
    record["target"] = target.key
    return record


def run_crash(
    target: Target,
    *,
    quick: bool = False,
    activities: str = "async",
    timeout: float = 900.0,
    keep: bool = False,
) -> dict[str, Any]:
    """Scenario C: phase 1, SIGKILL at 25 % shipped, phase 2 in recover mode."""
    n = QUICK_N["C"] if quick else SCENARIOS["C"]["n"]
    threshold = max(1, int(n * CRASH_FRACTION + 0.999999))
    workdir = Path(tempfile.mkdtemp(prefix=f"bench-{target.key.replace('/', '-')}-C-"))
    prepared: Prepared | None = None
    record: dict[str, Any] = {"scenario": "C", "n": n}
    counter: RowCounter | None = None
    try:
        prepared = Prepared(target, workdir, activities)
        base_spec = {
            "scenario": "C",
            "engine": target.engine,
            "engine_config": prepared.engine_config,
            "services": prepared.services,
            "n": n,
            "clients": 0,
            "warmup": 0,
            "fail_step": None,
        }
        machine_cpu = MachineCpu()
        monitors = prepared.monitors()
        out1 = workdir / "phase1.json"
        p1 = Child(
            scenario_cmd({**base_spec, "mode": "crash1"}, out1),
            workdir / "phase1.log",
            markers=("SUBMITTED", "ALL_DONE"),
        )
        if not p1.wait_marker("SUBMITTED", min(timeout, 300)):
            p1.kill()
            p1.wait(30)
            raise RuntimeError(
                "phase 1 never printed SUBMITTED: "
                + " | ".join(p1.usage().get("output_tail", [])[-15:])
            )
        counter = RowCounter(prepared.services)
        shipped = 0
        deadline = time.monotonic() + min(timeout, 300)
        while shipped < threshold:
            p1.sample()
            shipped = counter.count("shipping")
            if shipped >= threshold or time.monotonic() > deadline or p1.proc.poll() is not None:
                break
            time.sleep(0.002)
        p1.kill()
        t_kill = time.time()
        p1.wait(30)
        rows_at_kill = counter.counts()
        record["killed_at_epoch"] = t_kill
        record["rows_at_kill"] = rows_at_kill
        record["shipped_at_kill"] = rows_at_kill["shipping"]
        record["kill_threshold"] = threshold
        record["phase1_submitted_to_kill_s"] = t_kill - p1.markers.get("SUBMITTED", t_kill)
        record["phase1_all_done_before_kill"] = "ALL_DONE" in p1.markers
        record["phase1_process"] = p1.usage()
        if shipped < threshold:
            raise RuntimeError(f"only {shipped}/{n} shipped before the phase-1 deadline")

        out2 = workdir / "phase2.json"
        p2_monitors = prepared.monitors()
        p2 = Child(
            scenario_cmd({**base_spec, "mode": "crash2", "wait_timeout": timeout}, out2),
            workdir / "phase2.log",
        )
        finished = p2.wait(timeout + 60)
        p2_external = _external(p2_monitors)
        external = _external(monitors)
        phase2 = _load(out2)
        record.update({k: v for k, v in phase2.items() if k not in ("scenario", "n")})
        if not finished:
            record["failed"] = f"phase 2 timed out after {timeout + 60:.0f}s (killed)"
        elif p2.exit_code != 0 and "failed" not in record:
            record["failed"] = f"phase 2 exit code {p2.exit_code}"
        if "t_done_epoch" in phase2:
            record["recovery_s"] = phase2["t_done_epoch"] - p2.spawn_epoch
            record["spawn_to_ready_s"] = phase2["t_ready_epoch"] - p2.spawn_epoch
            record["kill_to_done_s"] = phase2["t_done_epoch"] - t_kill
        record["process"] = p2.usage()
        record["external"] = external
        record["external_phase2"] = p2_external
        record["machine_cpu"] = machine_cpu.stop(
            _ours(record["phase1_process"], record["process"], *external)
        )
        record["server"] = prepared.server_info()
        if prepared.history is not None:
            record.update(prepared.history)
    except Exception as exc:
        record["failed"] = f"{type(exc).__name__}: {exc}"
    finally:
        if counter is not None:
            counter.close()
        if prepared is not None:
            prepared.close()
        if not keep:
            shutil.rmtree(workdir, ignore_errors=True)
    record["workdir"] = str(workdir) if keep else None
    record["target"] = target.key
    return record


def snapshot_sagaway() -> dict[str, Any]:
    """Freeze the Sagaway code every child process of this run imports.

    Sagaway is installed in editable mode and its source may change while a long run is going
    on; the package is copied to a temporary directory put first on ``PYTHONPATH`` (inherited by
    every scenario process and Sagaway worker), so all rounds run the same code. Returns where
    it came from: git commit, uncommitted files under ``src/``, and a digest of the copy.
    """
    import hashlib
    import importlib.util

    spec = importlib.util.find_spec("sagaway")
    if spec is None or not spec.submodule_search_locations:
        return {"snapshot": None, "reason": "sagaway not importable"}
    source = Path(next(iter(spec.submodule_search_locations)))
    root = Path(tempfile.mkdtemp(prefix="sagaway-snapshot-"))
    atexit.register(shutil.rmtree, root, ignore_errors=True)
    shutil.copytree(source, root / "sagaway", ignore=shutil.ignore_patterns("__pycache__"))
    digest = hashlib.sha256()
    for path in sorted((root / "sagaway").rglob("*")):
        if path.is_file():
            digest.update(str(path.relative_to(root)).encode())
            digest.update(path.read_bytes())
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [str(root), *filter(None, [os.environ.get("PYTHONPATH")])]
    )

    def git(*args: str) -> str:
        try:
            return subprocess.run(
                ["git", *args], cwd=REPO, capture_output=True, text=True, timeout=30
            ).stdout.strip()
        except Exception as exc:
            return f"unavailable: {exc}"

    return {
        "snapshot": str(root),
        "source": str(source),
        "git_commit": git("rev-parse", "--short", "HEAD"),
        "git_commit_subject": git("log", "-1", "--format=%s"),
        "uncommitted_in_src": git("status", "--porcelain", "--", "src").splitlines(),
        "sha256": digest.hexdigest()[:16],
    }


def cleanup_postgres() -> None:
    """Drop every schema the benchmark creates in the bench database, and ``bench_absurd``."""
    with contextlib.suppress(Exception):
        from benchmarks import absurd_adapter

        absurd_adapter.drop(_pg_url_for("postgres"), absurd_adapter.database_for(_pg_dbname()))
    with contextlib.suppress(Exception):
        drop_schemas(
            *PG_SCHEMAS.values(), *(f"{workload.PG_SERVICE_PREFIX}{s}" for s in workload.SERVICES)
        )
