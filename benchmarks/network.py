"""PostgreSQL across a network: ``python -m benchmarks.network --rtt 0,1,2,5 [--repeat 3]``.

Deployments rarely have the database on the same host. This runs A_thr and A_seq of Sagaway on
PostgreSQL and of the minimal hand-written checkpointing baseline with the database behind a
round-trip delay, and reports the curve over the RTTs given:

* a network namespace ``sgwnet-<pid>`` and a veth pair (``sgwh<pid>`` in the root namespace,
  ``sgwn<pid>`` inside), addresses ``10.231.X.1`` / ``10.231.X.2``;
* PostgreSQL listens on 127.0.0.1 only, so a forwarder in the root namespace
  (``benchmarks.netdelay``, a separate process whose CPU is counted with the servers') accepts on
  ``10.231.X.1:5432`` and relays to ``127.0.0.1:5432``;
* the delay, RTT/2 each way: ``tc qdisc ... netem delay`` on both veth ends where the kernel has
  ``sch_netem`` (``--delay netem``), else held by the forwarder (``--delay forwarder``); ``auto``
  (the default) tries netem in a throw-away namespace first. ``SELECT 1`` round trips measured
  from inside the namespace are reported beside the nominal RTT;
* the scenario process runs inside the namespace (``ip netns exec``), its engine and service
  URLs pointing at ``10.231.X.1``; the orchestrator, the schema set-up and the checks stay on
  127.0.0.1.

Both engines get the same connection budget per process: engine pool 5 (Sagaway
``pool_size=5``; the baseline's pool 5) and 5 per service (``BENCH_SVC_POOL_SIZE=5``). RTT 0
runs the same path (namespace, veth, forwarder) without delay. The namespace, the link and the
forwarder are removed after the run, also on Ctrl-C, SIGTERM or a failure; leftovers of a run
killed with SIGKILL are removed by the next run (namespaces whose pid is gone).

Needs root (``ip netns add``) and ``ip``; without them it says why and exits with status 2.
Writes ``benchmarks/results/network-<date>.json`` and the section between
``<!-- network:begin -->`` and ``<!-- network:end -->`` of the README.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
import urllib.parse
from pathlib import Path
from types import FrameType
from typing import Any

from benchmarks import orchestrate, report
from benchmarks.orchestrate import Target, Unavailable

HERE = Path(__file__).resolve().parent
BEGIN, END = "<!-- network:begin -->", "<!-- network:end -->"
POOL = 5
"""Connections per process: the engine's pool and each service's pool."""
PORT = 5432
NS_PREFIX = "sgwnet-"
FORWARDER_PRIORITY = ("chrt", "--fifo", "10")
"""SCHED_FIFO 10 for the forwarder (if ``chrt`` is there): it sleeps between chunks, and the
kernel's real-time throttling (95 % of a period) bounds it anyway."""
SCENARIOS = ("A_thr", "A_seq")
GOAL_RTT = 2.0
GOAL_THR, GOAL_P50 = 2.0, 1.15
"""At 2 ms RTT: Sagaway A_thr >= 2x the baseline's, A_seq p50 <= 1.15x the baseline's."""

TARGETS: list[Target] = [
    Target("sagaway/postgres", "sagaway", "postgres", "Sagaway / PostgreSQL", crash=False),
    Target(
        "checkpoint/postgres",
        "checkpoint",
        "postgres",
        "minimal hand-written checkpointing / PostgreSQL",
        crash=False,
        options=(("pool_size", POOL),),
    ),
]


def _run(*cmd: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    if check and done.returncode != 0:
        raise RuntimeError(f"{shlex.join(cmd)}: exit {done.returncode}: {done.stderr.strip()}")
    return done


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_stale() -> list[str]:
    """Delete the namespaces (and host links) of earlier runs whose process is gone."""
    removed = []
    listed = _run("ip", "netns", "list", check=False).stdout
    for line in listed.splitlines():
        name = line.split()[0] if line.split() else ""
        m = re.fullmatch(rf"{NS_PREFIX}(\d+)(-probe)?", name)
        if m and not _alive(int(m.group(1))):
            _run("ip", "link", "del", f"sgwh{m.group(1)}", check=False)
            _run("ip", "netns", "del", name, check=False)
            removed.append(name)
    return removed


class ForwarderCpu:
    """CPU seconds of the forwarder process (a monitor of ``orchestrate.run_scenario``)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.start = self.snapshot()

    def snapshot(self) -> float:
        return orchestrate.proc_cpu(self.pid) or 0.0

    def stop(self) -> dict[str, Any]:
        return {"what": "forwarder (benchmarks.netdelay)", "cpu_s": self.snapshot() - self.start}


def netem_available() -> bool:
    """Whether ``tc`` can add a ``netem`` qdisc here (tried in a throw-away namespace)."""
    if shutil.which("tc") is None:
        return False
    ns = f"{NS_PREFIX}{os.getpid()}-probe"
    if _run("ip", "netns", "add", ns, check=False).returncode != 0:
        return False
    try:
        _run("ip", "-n", ns, "link", "set", "lo", "up", check=False)
        added = _run("ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", "lo", "root",
                     "netem", "delay", "1ms", check=False)  # fmt: skip
        return added.returncode == 0
    finally:
        _run("ip", "netns", "del", ns, check=False)


class NetPath:
    """The namespace, the veth pair, the delay and the forwarder; a context manager.

    Also the ``route`` of ``orchestrate.run_scenario``: ``spec``, ``command``, ``monitors``.
    ``delay``: ``netem`` (``tc qdisc ... netem delay RTT/2`` on both veth ends, the forwarder
    relays at once) or ``forwarder`` (the forwarder holds each chunk RTT/2).
    """

    def __init__(self, delay: str) -> None:
        pid = os.getpid()
        self.delay = delay
        self.ns = f"{NS_PREFIX}{pid}"
        self.host_if, self.ns_if = f"sgwh{pid}", f"sgwn{pid}"
        third = 20 + pid % 200
        self.host_ip, self.ns_ip = f"10.231.{third}.1", f"10.231.{third}.2"
        self.forwarder: subprocess.Popen[bytes] | None = None
        self.priority: tuple[str, ...] = FORWARDER_PRIORITY if shutil.which("chrt") else ()
        """The forwarder stands in for the kernel's netem: real-time priority, so that on a
        loaded machine it sends each chunk when due rather than when it gets a core."""
        self.rtt_ms = 0.0
        self._made: list[str] = []

    @staticmethod
    def check() -> None:
        """Raise ``Unavailable`` with the reason if this machine cannot run the scenario."""
        if os.geteuid() != 0:
            raise Unavailable("needs root (ip netns add, ip link add ... type veth)")
        if shutil.which("ip") is None:
            raise Unavailable("`ip` not found (apt-get install iproute2)")

    def __enter__(self) -> NetPath:
        try:
            self._make()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _make(self) -> None:
        ip = ("ip",)
        _run(*ip, "netns", "add", self.ns)
        self._made.append("ns")
        _run(*ip, "link", "add", self.host_if, "type", "veth", "peer", "name", self.ns_if)
        self._made.append("link")
        _run(*ip, "link", "set", self.ns_if, "netns", self.ns)
        _run(*ip, "addr", "add", f"{self.host_ip}/30", "dev", self.host_if)
        _run(*ip, "link", "set", self.host_if, "up")
        _run(*ip, "-n", self.ns, "addr", "add", f"{self.ns_ip}/30", "dev", self.ns_if)
        _run(*ip, "-n", self.ns, "link", "set", self.ns_if, "up")
        _run(*ip, "-n", self.ns, "link", "set", "lo", "up")

    def _start_forwarder(self, delay_ms: float) -> None:
        self._stop_forwarder()
        self.forwarder = subprocess.Popen(
            [
                *self.priority,
                *(sys.executable, "-m", "benchmarks.netdelay"),
                *("--listen", f"{self.host_ip}:{PORT}", "--to", f"127.0.0.1:{PORT}"),
                *("--delay-ms", f"{delay_ms:g}"),
            ],
            cwd=HERE.parent,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        assert self.forwarder.stdout is not None
        line = self.forwarder.stdout.readline().decode(errors="replace")
        if not line.startswith("LISTENING"):
            rest = self.forwarder.stdout.read().decode(errors="replace")
            raise RuntimeError(f"the forwarder did not start: {line}{rest}")

    def _stop_forwarder(self) -> None:
        if self.forwarder is None:
            return
        with contextlib.suppress(ProcessLookupError):
            self.forwarder.terminate()
        try:
            self.forwarder.wait(10)
        except subprocess.TimeoutExpired:
            self.forwarder.kill()
            self.forwarder.wait(10)
        if self.forwarder.stdout is not None:
            self.forwarder.stdout.close()
        self.forwarder = None

    def set_rtt(self, rtt_ms: float) -> None:
        """RTT/2 each way: netem on both veth ends, or held by the forwarder."""
        if self.delay == "netem":
            for prefix, dev in ((("ip", "netns", "exec", self.ns), self.ns_if), ((), self.host_if)):
                _run(*prefix, "tc", "qdisc", "del", "dev", dev, "root", check=False)
                if rtt_ms > 0:
                    _run(*prefix, "tc", "qdisc", "add", "dev", dev, "root", "netem", "delay",
                         f"{rtt_ms / 2:g}ms", "limit", "100000")  # fmt: skip
            if self.forwarder is None:
                self._start_forwarder(0.0)
        else:
            self._start_forwarder(rtt_ms / 2)
        self.rtt_ms = rtt_ms

    def close(self) -> None:
        """Stop the forwarder, delete the link (both ends) and the namespace."""
        self._stop_forwarder()
        if "link" in self._made:
            _run("ip", "link", "del", self.host_if, check=False)
        if "ns" in self._made:
            _run("ip", "netns", "del", self.ns, check=False)
        self._made.clear()

    # -- the route of orchestrate.run_scenario

    def url(self, url: str) -> str:
        parts = urllib.parse.urlsplit(url)
        netloc = parts.netloc.rsplit("@", 1)
        host = f"{self.host_ip}:{PORT}"
        netloc[-1] = host
        return urllib.parse.urlunsplit(parts._replace(netloc="@".join(netloc)))

    def spec(self, spec: dict[str, Any]) -> dict[str, Any]:
        spec = json.loads(json.dumps(spec))
        config = spec["engine_config"]
        config["url"] = self.url(config["url"])
        if spec["engine"] == "sagaway":
            config["url"] += f"&pool_size={POOL}"
        spec["services"]["url"] = self.url(spec["services"]["url"])
        return spec

    def command(self, cmd: list[str]) -> list[str]:
        return ["ip", "netns", "exec", self.ns, *cmd]

    def monitors(self) -> list[Any]:
        return [ForwarderCpu(self.forwarder.pid)] if self.forwarder is not None else []

    def probe(self) -> dict[str, Any]:
        """``SELECT 1`` round trips from inside the namespace through the path (ms)."""
        code = (
            "import psycopg,time,json,statistics as s\n"
            f"c=psycopg.connect({self.url(orchestrate.BENCH_PG_URL)!r},autocommit=True)\n"
            "t=[]\n"
            "for _ in range(30):\n"
            " a=time.perf_counter();c.execute('SELECT 1').fetchone();"
            "t.append(1000*(time.perf_counter()-a))\n"
            "print(json.dumps({'select1_p50_ms':s.median(t),'select1_min_ms':min(t)}))\n"
        )
        done = _run(*self.command([sys.executable, "-c", code]), check=False)
        if done.returncode != 0:
            return {"error": done.stderr.strip()[-500:]}
        loaded: dict[str, Any] = json.loads(done.stdout)
        return loaded


def _load() -> list[float]:
    return [round(float(x), 2) for x in Path("/proc/loadavg").read_text().split()[:3]]


def _median(values: list[float]) -> float | None:
    values = sorted(values)
    return values[(len(values) - 1) // 2] if values else None


def run_matrix(
    path: NetPath, rtts: list[float], repeat: int, quick: bool, timeout: float
) -> dict[str, Any]:
    """Every RTT x target x scenario, ``repeat`` rounds; the records per RTT, target, scenario."""
    runs: dict[str, dict[str, dict[str, list[dict[str, Any]]]]] = {}
    probes: dict[str, list[dict[str, Any]]] = {}
    for rnd in range(1, repeat + 1):
        for rtt in rtts:
            path.set_rtt(rtt)
            probe = path.probe()
            probes.setdefault(f"{rtt:g}", []).append(probe)
            print(f"[round {rnd}/{repeat}] RTT {rtt:g} ms: probe {probe}", flush=True)
            for target in TARGETS:
                for name in SCENARIOS:
                    load0 = _load()
                    record = orchestrate.run_scenario(
                        target, name, quick=quick, timeout=timeout, route=path
                    )
                    record.update(round=rnd, rtt_ms=rtt, loadavg_start=load0, loadavg_end=_load())
                    record = {k: v for k, v in record.items() if k != "traceback"}
                    runs.setdefault(f"{rtt:g}", {}).setdefault(target.key, {}).setdefault(
                        name, []
                    ).append(record)
                    print(f"    {target.key} {name}: {_line(record)}", flush=True)
    return {"runs": runs, "probes": probes}


def _line(r: dict[str, Any]) -> str:
    if "failed" in r:
        return f"FAILED: {r['failed']}"
    cpu = (r.get("measured_cpu") or {}).get("per_wf_ms")
    return (
        f"{r['throughput_wf_s']:.1f} wf/s, p50 {r['latency_ms']['p50']:.1f} ms, "
        f"CPU {cpu if cpu is None else round(cpu, 2)} ms/wf, clean {report.clean(r)}, "
        f"load {r['loadavg_start'][0]}"
    )


def _cpu_per_wf(records: list[dict[str, Any]]) -> dict[str, list[float]]:
    """CPU ms per workflow of each run, by whom.

    ``cpu_ms_per_wf``: the measured part, client + the whole PostgreSQL cluster + forwarder
    (the cluster is shared with other work on this machine: an upper bound). ``client_ms_per_wf``:
    the scenario process over the measured part. ``pg_bench_ms_per_wf``: the backends of the
    ``bench`` database over the whole scenario (warm-up included) / (N + W).
    ``forwarder_ms_per_wf``: the forwarder over the whole scenario / (N + W).
    """
    found: dict[str, list[float]] = {
        "cpu_ms_per_wf": [],
        "client_ms_per_wf": [],
        "pg_bench_ms_per_wf": [],
        "forwarder_ms_per_wf": [],
    }
    for r in records:
        n, total_n = r.get("n") or 0, (r.get("n") or 0) + (r.get("warmup") or 0)
        if not n:
            continue
        per_wf = (r.get("measured_cpu") or {}).get("per_wf_ms")
        if per_wf is not None:
            found["cpu_ms_per_wf"].append(per_wf)
        if r.get("measured_client_cpu_s") is not None:
            found["client_ms_per_wf"].append(1000 * r["measured_client_cpu_s"] / n)
        for ext in r.get("external", []):
            if ext.get("bench_backends_cpu_s") is not None:
                found["pg_bench_ms_per_wf"].append(1000 * ext["bench_backends_cpu_s"] / total_n)
            if str(ext.get("what", "")).startswith("forwarder") and ext.get("cpu_s") is not None:
                found["forwarder_ms_per_wf"].append(1000 * ext["cpu_s"] / total_n)
    return found


def summarize(runs: dict[str, Any], probes: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per RTT: medians (and ranges) of both engines, the ratios, CPU, load."""
    rows = []
    for rtt, by_key in runs.items():
        row: dict[str, Any] = {"rtt_ms": float(rtt)}
        p50s = [p["select1_p50_ms"] for p in probes.get(rtt, []) if "select1_p50_ms" in p]
        row["select1_p50_ms"] = _median(p50s)
        for key, by_name in by_key.items():
            short = key.split("/")[0]
            for name, records in by_name.items():
                picked = report.pick_median(records, name)
                row[f"{short}_{name}"] = report.metric({"k": {name: picked}}, "k", name)
                row[f"{short}_{name}_all"] = picked["repeat_values"]
                row[f"{short}_{name}_clean"] = picked["repeat_clean"]
                for what, values in _cpu_per_wf(records).items():
                    row[f"{short}_{name}_{what}"] = _median(values)
                row.setdefault("loadavg_1min", []).extend(
                    r["loadavg_start"][0] for r in records if "loadavg_start" in r
                )
        s_thr, c_thr = row.get("sagaway_A_thr"), row.get("checkpoint_A_thr")
        s_p50, c_p50 = row.get("sagaway_A_seq"), row.get("checkpoint_A_seq")
        row["thr_ratio"] = s_thr / c_thr if s_thr and c_thr else None
        row["p50_ratio"] = s_p50 / c_p50 if s_p50 and c_p50 else None
        loads = row.pop("loadavg_1min", [])
        row["loadavg_1min"] = [min(loads), _median(loads), max(loads)] if loads else None
        rows.append(row)
    return sorted(rows, key=lambda r: r["rtt_ms"])


def goals(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The two goals at 2 ms RTT (n/a if 2 ms was not run)."""
    row = next((r for r in rows if r["rtt_ms"] == GOAL_RTT), None)
    found = []
    for what, key, goal, better in (
        (f"A_thr >= {GOAL_THR:g}x checkpointing at 2 ms RTT", "thr_ratio", GOAL_THR, "higher"),
        (f"A_seq p50 <= {GOAL_P50:g}x checkpointing at 2 ms RTT", "p50_ratio", GOAL_P50, "lower"),
    ):
        value = None if row is None else row.get(key)
        met = None if value is None else (value >= goal if better == "higher" else value <= goal)
        found.append({"goal": what, "value": value, "met": met})
    return found


def _fmt(v: float | None, digits: int = 1) -> str:
    return "n/a" if v is None else f"{v:.{digits}f}"


def _rng(values: list[float | None], digits: int = 1) -> str:
    got = [v for v in values if v is not None]
    if len(values) < 2 or not got:
        return ""
    return f" ({min(got):.{digits}f}-{max(got):.{digits}f})"


def _cpu(row: dict[str, Any], short: str) -> str:
    client, pg = (
        row.get(f"{short}_A_thr_client_ms_per_wf"),
        row.get(f"{short}_A_thr_pg_bench_ms_per_wf"),
    )
    return f"{_fmt(client, 2)} + {_fmt(pg, 2)}"


def render(doc: dict[str, Any]) -> str:
    rows = doc["rows"]
    lines = [
        BEGIN,
        "",
        f"#### Network run of {doc['date']}",
        "",
        f"Command: `{doc['command']}` ({doc['duration_s'] / 60:.0f} min; JSON: `{doc['json']}`); "
        f"{doc['repeat']} rounds over the whole matrix, median run shown with the range. Machine: "
        f"nproc {doc['machine']['nproc']}, shared with other work (1-min load average at the "
        "start of each scenario: min/median/max in the last column). Path: "
        f"{doc['settings']['path']}; {POOL} connections per process for the engine and {POOL} "
        "per service, for both.",
        "",
        "| RTT ms | `SELECT 1` ms | Sagaway A_thr wf/s | checkpointing A_thr wf/s | ratio | "
        "Sagaway A_seq p50 ms | checkpointing A_seq p50 ms | ratio | A_thr CPU ms/wf, client + "
        "PostgreSQL (Sagaway / checkpointing) | load |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        load = r["loadavg_1min"]
        lines.append(
            f"| {r['rtt_ms']:g} | {_fmt(r['select1_p50_ms'], 2)} "
            f"| {_fmt(r.get('sagaway_A_thr'))}{_rng(r.get('sagaway_A_thr_all', []))} "
            f"| {_fmt(r.get('checkpoint_A_thr'))}{_rng(r.get('checkpoint_A_thr_all', []))} "
            f"| {_fmt(r['thr_ratio'], 2)} "
            f"| {_fmt(r.get('sagaway_A_seq'))}{_rng(r.get('sagaway_A_seq_all', []))} "
            f"| {_fmt(r.get('checkpoint_A_seq'))}{_rng(r.get('checkpoint_A_seq_all', []))} "
            f"| {_fmt(r['p50_ratio'], 2)} "
            f"| {_cpu(r, 'sagaway')} / {_cpu(r, 'checkpoint')} "
            f"| {'n/a' if not load else '/'.join(f'{x:g}' for x in load)} |"
        )
    lines += [
        "",
        "CPU: `client` = the scenario process (engine, workers, services' client side) over the "
        "measured part / N; `PostgreSQL` = the backends of the `bench` database over the whole "
        "scenario / (N + W) (the cluster's total is in the JSON, `cpu_ms_per_wf`; it includes "
        "other work on the shared server). The forwarder's CPU is in the JSON "
        "(`forwarder_ms_per_wf`).",
        "",
        "| goal | value | |",
        "|---|---|---|",
    ]
    for g in doc["goals"]:
        verdict = "n/a" if g["met"] is None else ("MET" if g["met"] else "MISSED")
        lines.append(f"| {g['goal']} | {_fmt(g['value'], 2)} | {verdict} |")
    unclean = [
        f"{r['rtt_ms']:g} ms {k[: -len('_clean')]}"
        for r in rows
        for k, v in r.items()
        if k.endswith("_clean") and not all(v)
    ]
    lines += [
        "",
        "Every run clean (right results, no errors, exact service tables)."
        if not unclean
        else "Runs with wrong results, errors or bad tables: " + ", ".join(unclean) + ".",
        "",
        END,
    ]
    return "\n".join(lines)


def write_readme(section: str, path: Path) -> None:
    text = path.read_text()
    lines = text.split("\n")
    if BEGIN in lines and END in lines[lines.index(BEGIN) :]:
        start = lines.index(BEGIN)
        end = lines.index(END, start)
        text = "\n".join([*lines[:start], section, *lines[end + 1 :]])
    else:
        text = text.rstrip("\n") + "\n\n## PostgreSQL across a network\n\n" + section + "\n"
    path.write_text(text)


def rerender(json_path: Path, readme: str | None) -> int:
    """Recompute the rows and goals of a run's JSON from its records; rewrite it and the README."""
    doc = json.loads(json_path.read_text())
    doc["rows"] = summarize(doc["runs"], doc["probes"])
    doc["goals"] = goals(doc["rows"])
    json_path.write_text(json.dumps(doc, indent=2, default=str) + "\n")
    section = render(doc)
    print(section)
    target = str(HERE / "README.md") if readme is None else readme
    if target:
        write_readme(section, Path(target))
    return 0


def _stop(signum: int, frame: FrameType | None) -> None:
    # A terminal's Ctrl-C reaches the whole process group; SIGTERM/SIGHUP only this process:
    # end the running scenario process too, then unwind through the finally blocks.
    for child in orchestrate._children(os.getpid()):
        with contextlib.suppress(ProcessLookupError):
            os.kill(child, signal.SIGTERM)
    raise SystemExit(128 + signum)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.network", description=__doc__)
    parser.add_argument("--rtt", default="0,1,2,5", help="round-trip times in ms (default 0,1,2,5)")
    parser.add_argument("--repeat", type=int, default=1, help="rounds over the whole matrix")
    parser.add_argument("--quick", action="store_true", help="small N (smoke check, no README)")
    parser.add_argument(
        "--delay", choices=("auto", "netem", "forwarder"), default="auto", help="how RTT is made"
    )
    parser.add_argument("--timeout", type=float, default=900.0)
    parser.add_argument("--json", default=None)
    parser.add_argument("--readme", default=None, help="README to update ('' for none)")
    parser.add_argument(
        "--from-json", default=None, metavar="PATH", help="re-render a run's JSON (runs nothing)"
    )
    args = parser.parse_args(argv)
    if args.from_json:
        return rerender(Path(args.from_json), args.readme)
    rtts = [float(x) for x in args.rtt.split(",") if x.strip()]
    try:
        NetPath.check()
        orchestrate.ensure_bench_database()
    except Unavailable as exc:
        print(f"benchmarks.network skipped: {exc}", file=sys.stderr)
        return 2
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _stop)
    stale = remove_stale()
    delay = args.delay
    if delay == "auto":
        delay = "netem" if netem_available() else "forwarder"
        if delay == "forwarder":
            print("no sch_netem in this kernel (tc qdisc add ... netem fails): the forwarder "
                  "holds each chunk RTT/2 instead", flush=True)  # fmt: skip
    if stale:
        print(f"removed namespaces of earlier runs: {', '.join(stale)}", flush=True)
    os.environ["BENCH_SVC_POOL_SIZE"] = str(POOL)
    started, t0 = dt.datetime.now(dt.UTC), time.perf_counter()
    stamp = started.strftime("%Y-%m-%d") + ("-quick" if args.quick else "")
    json_path = Path(args.json) if args.json else HERE / "results" / f"network-{stamp}.json"
    path_priority: tuple[str, ...] = ()
    try:
        with NetPath(delay) as path:
            print(f"namespace {path.ns}: {path.ns_ip} -> forwarder {path.host_ip}:{PORT} -> "
                  f"127.0.0.1:{PORT}, delay by {delay}", flush=True)  # fmt: skip
            path_priority = path.priority
            matrix = run_matrix(path, rtts, args.repeat, args.quick, args.timeout)
    except Exception as exc:
        print(f"benchmarks.network failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    finally:
        orchestrate.cleanup_postgres()
    rows = summarize(matrix["runs"], matrix["probes"])
    from benchmarks.compare import machine

    doc: dict[str, Any] = {
        "date": started.isoformat(timespec="seconds"),
        "command": shlex.join(["python", "-m", "benchmarks.network", *(argv or sys.argv[1:])]),
        "repeat": args.repeat,
        "quick": args.quick,
        "duration_s": time.perf_counter() - t0,
        "json": str(json_path.relative_to(HERE.parent))
        if json_path.is_relative_to(HERE.parent)
        else str(json_path),
        "machine": machine(),
        "settings": {
            "pool_per_process": POOL,
            "delay": delay,
            "forwarder_priority": " ".join(path_priority) or "normal",
            "path": "client in a network namespace -> veth -> forwarder (root namespace) -> "
            "PostgreSQL on 127.0.0.1; RTT/2 each way "
            + ("by netem on both veth ends" if delay == "netem" else "held by the forwarder"),
        },
        "rows": rows,
        "goals": goals(rows),
        "runs": matrix["runs"],
        "probes": matrix["probes"],
    }
    json_path.parent.mkdir(parents=True, exist_ok=True)
    json_path.write_text(json.dumps(doc, indent=2, default=str) + "\n")
    section = render(doc)
    print("\n" + section + f"\n\nwrote {json_path}")
    readme = (
        args.readme if args.readme is not None else ("" if args.quick else str(HERE / "README.md"))
    )
    if readme:
        write_readme(section, Path(readme))
        print(f"updated {readme}")
    bad = any(not all(v) for r in rows for k, v in r.items() if k.endswith("_clean"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
