"""CPU per workflow of 3 worker processes against 1, without start-up costs.

``python -m benchmarks.scaleout_cpu [--rounds R] [--small N1] [--large N2]`` runs scenario A_thr
of ``sagaway/postgres-1worker`` and ``sagaway/postgres-3proc`` (see ``compare.py``) once with N1
and once with N2 workflows, and prints for each the CPU of the difference per workflow:
(CPU at N2 - CPU at N1) / (N2 - N1). Interpreter start-up, imports, warm-up and shutdown are the
same in both runs and cancel out, which the totals of ``benchmarks.run`` do not (three workers
start three interpreters). CPU is counted for the client process, the worker processes and the
PostgreSQL backends of the bench database (the cluster's total is printed too; on a shared
machine it includes other users of the server). The ratio of the sums, 3 workers over 1, is the
figure of the scale-out efficiency goal (at most 1.15).
"""

from __future__ import annotations

import argparse
import statistics
from typing import Any

from benchmarks import compare, orchestrate

KEYS = ("sagaway/postgres-1worker", "sagaway/postgres-3proc")
PARTS = ("client", "workers", "pg")


def _cpu(record: dict[str, Any]) -> dict[str, float]:
    proc = record["process"]
    workers = record.get("worker_processes") or []
    external = record["external"][0]
    return {
        "client": proc["cpu_user_s"] + proc["cpu_sys_s"],
        "workers": sum(w["cpu_user_s"] + w["cpu_sys_s"] for w in workers),
        "pg": external["bench_backends_cpu_s"],
        "cluster": external["cpu_s"],
    }


def _run(key: str, n: int) -> dict[str, float]:
    orchestrate.SCENARIOS["A_thr"]["n"] = n
    target = next(t for t in compare.MULTI if t.key == key)
    record = orchestrate.run_scenario(target, "A_thr")
    if record.get("completed") != n or record.get("errors") or record.get("wrong_results"):
        raise RuntimeError(f"{key} N={n}: {record.get('completed')} completed, not clean")
    return _cpu(record)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--small", type=int, default=200)
    parser.add_argument("--large", type=int, default=1200)
    args = parser.parse_args()
    orchestrate.ensure_bench_database()
    orchestrate.snapshot_sagaway()
    per_wf: dict[str, list[dict[str, float]]] = {key: [] for key in KEYS}
    span = args.large - args.small
    for round_no in range(1, args.rounds + 1):
        for key in KEYS:
            small, large = _run(key, args.small), _run(key, args.large)
            ms = {part: (large[part] - small[part]) / span * 1e3 for part in large}
            ms["total"] = sum(ms[part] for part in PARTS)
            per_wf[key].append(ms)
            with open("/proc/loadavg") as f:
                load = f.read().split()[0]
            shown = " ".join(f"{part} {value:.2f}" for part, value in ms.items())
            print(f"round {round_no} {key}: ms/wf {shown} (load {load})", flush=True)
    medians = {key: statistics.median(r["total"] for r in rows) for key, rows in per_wf.items()}
    for key, total in medians.items():
        print(f"{key}: median total {total:.2f} ms/wf")
    print(f"3 workers / 1 worker: {medians[KEYS[1]] / medians[KEYS[0]]:.2f}x")


if __name__ == "__main__":
    main()
