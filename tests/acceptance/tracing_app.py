"""A traced saga for the kill -9 test: python tracing_app.py DB_URL KEY (start|recover).

Every span this process ends is appended at once, as one JSON line, to the file SPANS names
(a span exporter that writes synchronously: what a killed process had ended is on disk).
``start`` creates the workflow; its second activity blocks when BLOCK=1 (printing BLOCKED)
until the process is killed. ``recover`` runs the Manager until the workflow ends, printing
its result.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Sequence

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

import sagaway as sw
from sagaway.telemetry import tracing

manager = sw.Manager(
    sys.argv[1] if len(sys.argv) > 1 else None, lease_timeout=1.0, poll_interval=0.05
)
BLOCK = os.environ.get("BLOCK") == "1"


class FileExporter(SpanExporter):
    """Appends each ended span to a file, one JSON object per line."""

    def __init__(self, path: str) -> None:
        self.path = path

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        with open(self.path, "a", encoding="utf-8") as out:
            for span in spans:
                assert span.context is not None
                out.write(
                    json.dumps(
                        {
                            "name": span.name,
                            "trace_id": span.context.trace_id,
                            "span_id": span.context.span_id,
                            "parent_id": None if span.parent is None else span.parent.span_id,
                            "attributes": dict(span.attributes or {}),
                            "pid": os.getpid(),
                        }
                    )
                    + "\n"
                )
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        return None


@manager.register_activity(name="pack")
async def pack(order: str) -> str:
    return f"box-{order}"


@manager.register_activity(name="ship")
async def ship(box: str) -> str:
    if BLOCK:
        print("BLOCKED", flush=True)
        await asyncio.Event().wait()
    return f"shipped {box}"


@manager.register_workflow(name="delivery")
async def delivery(order: str) -> str:
    return await ship(await pack(order))


async def main() -> None:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(FileExporter(os.environ["SPANS"])))
    tracing.enable_tracing(provider)
    key, mode = sys.argv[2], sys.argv[3]
    async with manager:
        if mode == "start":
            await manager.workflow(delivery, key).execute(idempotency_key=key)
            await asyncio.Event().wait()
        print(await manager.get_workflow(key).result(timeout=60), flush=True)


if __name__ == "__main__":
    asyncio.run(main())
