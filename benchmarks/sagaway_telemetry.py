"""Sagaway's metrics and tracing switched on in a benchmark process (``--telemetry on``).

What a production process would pay: Prometheus metrics into Sagaway's own registry, and
OpenTelemetry spans made by the SDK (``TracerProvider``, sampled, attributes set) and queued to a
``BatchSpanProcessor`` whose exporter drops every batch. So only the network send is left out.
The exporter counts what it received, so the results show that spans were really made.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.sampling import ALWAYS_ON, ParentBased, TraceIdRatioBased

from sagaway.telemetry import disable_metrics, disable_tracing, enable_metrics, enable_tracing


class DroppingExporter(SpanExporter):
    """Receives every batch of finished spans, counts it and throws it away."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.spans = 0
        self.batches = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        with self._lock:
            self.spans += len(spans)
            self.batches += 1
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass


class Telemetry:
    """Metrics and tracing on for this process, from ``__init__`` until ``close``."""

    def __init__(self, ratio: float = 1.0) -> None:
        self.ratio = ratio
        self.exporter = DroppingExporter()
        sampler = ALWAYS_ON if ratio >= 1.0 else ParentBased(TraceIdRatioBased(ratio))
        self.provider = TracerProvider(sampler=sampler)
        self.processor = BatchSpanProcessor(self.exporter)  # the SDK's default queue and batch
        self.provider.add_span_processor(self.processor)
        self.registry = enable_metrics()
        enable_tracing(self.provider)
        self.closed = False

    def close(self) -> None:
        """Stop counting and tracing; flush the queued spans to the exporter (counted)."""
        if not self.closed:
            self.closed = True
            disable_tracing()
            disable_metrics()
            self.provider.shutdown()

    def record(self) -> dict[str, Any]:
        """For the results: what was on, and how many spans and attempts were seen."""
        attempts = self.registry.get_sample_value(
            "sagaway_activity_attempts_total",
            {"activity": "create_order", "kind": "activity", "outcome": "completed"},
        )
        return {
            "telemetry": "on",
            "metrics": "enable_metrics() (own CollectorRegistry)",
            "tracing": "enable_tracing(SDK TracerProvider, BatchSpanProcessor defaults, "
            "exporter dropping every span)",
            "trace_ratio": self.ratio,
            "spans_exported": self.exporter.spans if self.closed else None,
            "export_batches": self.exporter.batches if self.closed else None,
            "create_order_attempts_counted": attempts,
        }
