"""Instructions per workflow with Sagaway's telemetry off and on, counted by valgrind.

Wall-clock throughput on a shared 2-vCPU machine varies by tens of percent between runs, more
than the cost being measured. An instruction count does not: run the same workload with N and
3N workflows under ``valgrind --tool=callgrind`` and divide the difference by 2N (start-up and
warm-up cancel out)::

    for mode in off metrics r01 all; do for n in 300 900; do
      PYTHONPATH=src valgrind --tool=callgrind --callgrind-out-file=/dev/null \
        python -m benchmarks.telemetry_instructions $mode $n 2>&1 | grep 'I   refs'
    done; done

Modes: ``off``; ``metrics`` (enable_metrics); ``r01`` (metrics, and tracing with
``ParentBased(TraceIdRatioBased(0.1))``); ``all`` (metrics, and tracing of every workflow). The
workload: a 4-activity workflow on embedded SQLite, 100 at a time, 200 warm-up workflows first.
Without valgrind it prints CPU milliseconds per workflow (noisy on a shared machine).
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from collections.abc import Sequence

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.sampling import ALWAYS_ON, ParentBased, TraceIdRatioBased

import sagaway as sw
from sagaway import telemetry

MODES = ("off", "metrics", "r01", "all")


class _Drop(SpanExporter):
    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        return None


def _telemetry(mode: str) -> None:
    if mode == "off":
        return
    telemetry.enable_metrics()
    if mode == "metrics":
        return
    sampler = ALWAYS_ON if mode == "all" else ParentBased(TraceIdRatioBased(0.1))
    provider = TracerProvider(sampler=sampler)
    provider.add_span_processor(BatchSpanProcessor(_Drop()))
    telemetry.enable_tracing(provider)


def _build(url: str) -> sw.Manager:
    manager = sw.Manager(url)

    @manager.register_activity(name="step")
    async def step(i: int) -> int:
        return i

    @manager.register_workflow(name="four_steps")
    async def four_steps(i: int) -> int:
        return await step(i) + await step(i) + await step(i) + await step(i)

    return manager


async def _run(manager: sw.Manager, first: int, n: int) -> None:
    gate = asyncio.Semaphore(100)

    async def one(i: int) -> None:
        async with gate:
            await manager.workflow("four_steps", i).execute_get(idempotency_key=f"k{i}")

    await asyncio.gather(*(one(i) for i in range(first, first + n)))


async def main(mode: str, n: int) -> None:
    _telemetry(mode)
    manager = _build(f"sqlite:///{tempfile.mkdtemp()}/engine.db")
    async with manager:
        await _run(manager, 0, 200)  # warm-up
        cpu = time.process_time()
        await _run(manager, 200, n)
        cpu = time.process_time() - cpu
    print(f"{mode}: {n} workflows, {cpu / n * 1000:.3f} CPU ms per workflow")


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in MODES:
        sys.exit(f"usage: python -m benchmarks.telemetry_instructions {{{','.join(MODES)}}} N")
    asyncio.run(main(sys.argv[1], int(sys.argv[2])))
