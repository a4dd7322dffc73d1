"""One scenario in one fresh process: ``python -m benchmarks.scenario --spec JSON --out PATH``.

Started by ``benchmarks.run``; the engine database and the service databases are fresh (the
orchestrator gives each scenario a new workdir, and a dropped PostgreSQL schema). Client and
worker share this process (WORKLOAD.md §3).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
import traceback
from pathlib import Path
from typing import Any

from benchmarks import workload
from benchmarks.sagaway_adapter import ManagerSettings, SagawayAdapter
from benchmarks.workload import Services

RESULT_TIMEOUT = 120.0
"""Seconds one workflow may take before the driver counts it as an error (a hang guard)."""


async def closed_loop(
    adapter: SagawayAdapter, ids: list[str], fail_step: str | None, clients: int
) -> dict[str, Any]:
    """C client tasks; each starts the next id, awaits its result, checks it, repeats."""
    expected = workload.expected_result(fail_step)
    pending = iter(ids)
    latencies: list[float] = []
    wrong: list[dict[str, Any]] = []
    errors: list[str] = []

    async def client() -> None:
        for wf_id in pending:  # a shared iterator: each id is taken by exactly one client
            t0 = time.perf_counter()
            try:
                handle = await adapter.start(wf_id, fail_step)
                async with asyncio.timeout(RESULT_TIMEOUT):
                    result = await adapter.result(handle)
            except Exception as exc:
                errors.append(f"{wf_id}: {type(exc).__name__}: {exc}")
                continue
            latencies.append(time.perf_counter() - t0)
            if json.dumps(result, sort_keys=True) != json.dumps(expected, sort_keys=True):
                wrong.append({"id": wf_id, "result": result})

    t_start = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(min(clients, len(ids)))))
    wall = time.perf_counter() - t_start
    return {"latencies": latencies, "wall": wall, "wrong": wrong, "errors": errors}


async def run_scenario(spec: dict[str, Any]) -> dict[str, Any]:
    workdir = Path(spec["workdir"])
    name: str = spec["scenario"]
    n: int = spec["n"]
    clients: int = spec["clients"]
    warmup: int = spec["warmup"]
    fail_step: str | None = spec["fail_step"]
    settings = ManagerSettings(url=spec["engine_url"], activities=spec["activities"])

    services = Services(workdir)
    services.create()
    adapter = SagawayAdapter(settings, services)
    prefix = name.lower()
    warm_ids = [f"{prefix}-w{i:05d}" for i in range(warmup)]
    ids = [f"{prefix}-{i:05d}" for i in range(n)]

    t_open = time.perf_counter()
    await adapter.open()
    open_s = time.perf_counter() - t_open
    try:
        warm = await closed_loop(adapter, warm_ids, fail_step, min(clients, warmup))
        measured = await closed_loop(adapter, ids, fail_step, clients)
        counts = await adapter.counts()
    finally:
        await adapter.close()
        services.close()

    check = services.check(dict.fromkeys(warm_ids + ids, fail_step))
    done = len(measured["latencies"])
    return {
        "scenario": name,
        "n": n,
        "clients": clients,
        "warmup": warmup,
        "fail_step": fail_step,
        "engine_open_s": open_s,
        "wall_s": measured["wall"],
        "throughput_wf_s": done / measured["wall"] if measured["wall"] > 0 else 0.0,
        "completed": done,
        "latency_ms": workload.latency_stats_ms(measured["latencies"]),
        "wrong_results": len(measured["wrong"]) + len(warm["wrong"]),
        "wrong_sample": (warm["wrong"] + measured["wrong"])[:5],
        "errors": len(measured["errors"]) + len(warm["errors"]),
        "error_sample": (warm["errors"] + measured["errors"])[:5],
        "engine_status_counts": counts,
        "service_check": check,
        "manager_settings": settings.as_record(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--spec", required=True, help="the scenario as JSON")
    parser.add_argument("--out", required=True, help="where to write the result JSON")
    args = parser.parse_args()
    spec = json.loads(args.spec)
    try:
        record = asyncio.run(run_scenario(spec))
    except BaseException as exc:
        record = {
            "scenario": spec.get("scenario"),
            "failed": f"{type(exc).__name__}: {exc}",
            "traceback": traceback.format_exc(),
        }
        Path(args.out).write_text(json.dumps(record, indent=2))
        raise
    Path(args.out).write_text(json.dumps(record, indent=2))


if __name__ == "__main__":
    main()
