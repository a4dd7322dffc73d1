"""One scenario (or one phase of scenario C) in one fresh process.

``python -m benchmarks.scenario --spec JSON --out PATH``, started by the orchestrator
(``benchmarks.run`` / ``benchmarks.compare``). The engine state and the service tables are fresh
(new workdir, dropped PostgreSQL schemas, new Temporal database). Client and worker share this
process (``benchmarks/WORKLOAD.md`` §3), except in the 3-worker-process variant (client only here).

Modes (``spec["mode"]``):

* ``run``: W warm-up workflows, then N measured ones, closed loop with C clients.
* ``crash1`` (scenario C, phase 1): close the side-effect gate, durably start all N workflows
  concurrently, open the gate, print ``SUBMITTED``, await the results. The orchestrator kills
  this process with SIGKILL once 25 % have shipped; if it is not killed it prints ``ALL_DONE``
  and waits to be killed anyway.
* ``crash2`` (scenario C, phase 2): open the engine in recover mode, print ``READY``, wait for
  all N ids without starting any (``wait_all``), check the results and the service tables
  (re-executed effects allowed and counted).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import resource
import time
import traceback
from pathlib import Path
from typing import Any, Protocol

from benchmarks import workload
from benchmarks.workload import Services

RESULT_TIMEOUT = 120.0
END_GRACE_S = 1.0
"""Seconds the connections stay open after MEASURE_END (see where it is used)."""
"""Seconds one workflow may take before the driver counts it as an error (a hang guard)."""

ADAPTERS: dict[str, str] = {
    "sagaway": "benchmarks.sagaway_adapter:SagawayAdapter",
    "dbos": "benchmarks.dbos_adapter:DBOSAdapter",
    "temporal": "benchmarks.temporal_adapter:TemporalAdapter",
    "sayiir": "benchmarks.sayiir_adapter:SayiirAdapter",
    "absurd": "benchmarks.absurd_adapter:AbsurdAdapter",
    "none": "benchmarks.baselines:NoEngineAdapter",
    "checkpoint": "benchmarks.baselines:CheckpointAdapter",
}


class Adapter(Protocol):
    """The adapter operations of ``benchmarks/WORKLOAD.md`` §5: one adapter per engine."""

    name: str

    async def open(self, recover: bool = False) -> None: ...
    async def start(self, wf_id: str, fail_step: str | None) -> Any: ...
    async def result(self, handle: Any) -> dict[str, Any]: ...
    async def wait_all(self, ids: list[str]) -> dict[str, Any]: ...
    async def counts(self) -> dict[str, int] | None: ...
    def describe(self) -> dict[str, Any]: ...
    async def close(self) -> None: ...


def make_adapter(engine: str, config: dict[str, Any], services: Services) -> Adapter:
    module_name, _, class_name = ADAPTERS[engine].partition(":")
    cls = getattr(importlib.import_module(module_name), class_name)
    adapter: Adapter = cls(config, services)
    return adapter


def crash_ids(n: int) -> list[str]:
    return [f"c-{i:05d}" for i in range(n)]


def _same(result: Any, expected: dict[str, Any]) -> bool:
    return json.dumps(result, sort_keys=True) == json.dumps(expected, sort_keys=True)


async def closed_loop(
    adapter: Adapter, ids: list[str], fail_step: str | None, clients: int
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
                async with asyncio.timeout(RESULT_TIMEOUT):
                    handle = await adapter.start(wf_id, fail_step)
                    result = await adapter.result(handle)
            except Exception as exc:
                errors.append(f"{wf_id}: {type(exc).__name__}: {exc}")
                continue
            latencies.append(time.perf_counter() - t0)
            if not _same(result, expected):
                wrong.append({"id": wf_id, "result": result})

    t_start = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(min(clients, len(ids)))))
    wall = time.perf_counter() - t_start
    return {"latencies": latencies, "wall": wall, "wrong": wrong, "errors": errors}


async def _counts(adapter: Adapter) -> dict[str, int] | None:
    try:
        async with asyncio.timeout(60):
            return await adapter.counts()
    except Exception as exc:
        return {f"error: {type(exc).__name__}: {exc}": 0}


async def run_measured(
    spec: dict[str, Any], adapter: Adapter, services: Services
) -> dict[str, Any]:
    name: str = spec["scenario"]
    n: int = spec["n"]
    clients: int = spec["clients"]
    warmup: int = spec["warmup"]
    fail_step: str | None = spec["fail_step"]
    prefix = name.lower()
    warm_ids = [f"{prefix}-w{i:05d}" for i in range(warmup)]
    ids = [f"{prefix}-{i:05d}" for i in range(n)]

    t_open = time.perf_counter()
    await adapter.open()
    open_s = time.perf_counter() - t_open
    try:
        warm = await closed_loop(adapter, warm_ids, fail_step, min(clients, warmup))
        # The orchestrator samples workers' and servers' CPU when it reads these lines.
        print("MEASURE_BEGIN", flush=True)
        cpu0 = _own_cpu()
        measured = await closed_loop(adapter, ids, fail_step, clients)
        cpu1 = _own_cpu()
        print("MEASURE_END", flush=True)
        counts = await _counts(adapter)
        # The orchestrator reads the database backends' CPU when it reads MEASURE_END: the
        # connections stay open until it has (a loaded machine may be slow to get there).
        await asyncio.sleep(END_GRACE_S)
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
        "measured_client_cpu_s": cpu1 - cpu0,
    }


def _own_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def run_crash1(spec: dict[str, Any], adapter: Adapter, services: Services) -> dict[str, Any]:
    ids = crash_ids(spec["n"])
    await adapter.open()
    services.close_gate()
    t0 = time.perf_counter()
    handles = await asyncio.gather(*(adapter.start(wf_id, None) for wf_id in ids))
    submit_s = time.perf_counter() - t0
    services.open_gate()
    print(f"SUBMITTED {len(handles)} in {submit_s:.3f}s", flush=True)
    results = await asyncio.gather(*(adapter.result(h) for h in handles), return_exceptions=True)
    ok = sum(1 for r in results if _same(r, workload.SUCCESS_RESULT))
    print(f"ALL_DONE {ok}/{len(ids)} (not killed in time)", flush=True)
    await asyncio.Event().wait()  # wait for SIGKILL (or the orchestrator's timeout)
    return {}


async def run_crash2(spec: dict[str, Any], adapter: Adapter, services: Services) -> dict[str, Any]:
    ids = crash_ids(spec["n"])
    t_open = time.time()
    await adapter.open(recover=True)
    t_ready = time.time()
    print("READY", flush=True)
    try:
        results = await asyncio.wait_for(adapter.wait_all(ids), spec.get("wait_timeout", 600))
        t_done = time.time()
        counts = await _counts(adapter)
    finally:
        await adapter.close()
        services.close()
    wrong = [
        {"id": wf_id, "result": r}
        for wf_id, r in results.items()
        if not _same(r, workload.SUCCESS_RESULT)
    ]
    check = services.check(dict.fromkeys(ids, None), allow_reexecution=True)
    return {
        "scenario": "C",
        "n": len(ids),
        "t_open_epoch": t_open,
        "t_ready_epoch": t_ready,
        "t_done_epoch": t_done,
        "ready_to_done_s": t_done - t_ready,
        "wrong_results": len(wrong),
        "wrong_sample": wrong[:5],
        "errors": 0,
        "engine_status_counts": counts,
        "service_check": check,
    }


async def run(spec: dict[str, Any]) -> dict[str, Any]:
    services = Services(spec["services"])
    mode = spec.get("mode", "run")
    if mode in ("run", "crash1"):
        services.create()
    adapter = make_adapter(spec["engine"], spec["engine_config"], services)
    describe = adapter.describe()
    if mode == "run":
        record = await run_measured(spec, adapter, services)
    elif mode == "crash1":
        record = await run_crash1(spec, adapter, services)
    elif mode == "crash2":
        record = await run_crash2(spec, adapter, services)
    else:
        raise ValueError(f"unknown mode {mode!r}")
    record["engine"] = spec["engine"]
    record["engine_settings"] = describe
    telemetry_record = getattr(adapter, "telemetry_record", None)  # Sagaway's adapter only
    if telemetry_record is not None:
        record["telemetry"] = telemetry_record()
    record["service_backend"] = services.describe()
    return record


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--spec", required=True, help="the scenario as JSON")
    parser.add_argument("--out", required=True, help="where to write the result JSON")
    args = parser.parse_args()
    spec = json.loads(args.spec)
    try:
        record = asyncio.run(run(spec))
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
