"""Seeing what the engine does: Prometheus metrics, OpenTelemetry traces, structured logs.

Each is off until enabled (nothing is counted or traced by default), process-wide:

- ``enable_metrics()`` (extra ``sagaway[metrics]``), see ``sagaway.telemetry.metrics``;
- ``enable_tracing()``, see ``sagaway.telemetry.tracing``;
- ``configure_logging()`` / ``ContextFilter`` / ``JsonFormatter``, see ``sagaway.telemetry.logs``.

Metrics are imported on first use, so this package loads without prometheus-client.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sagaway.telemetry.logs import ContextFilter, JsonFormatter, configure_logging
from sagaway.telemetry.tracing import disable_tracing, enable_tracing

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

__all__ = [
    "ContextFilter",
    "JsonFormatter",
    "configure_logging",
    "disable_metrics",
    "disable_tracing",
    "enable_metrics",
    "enable_tracing",
    "metrics_registry",
]


def enable_metrics(registry: CollectorRegistry | None = None) -> CollectorRegistry:
    """See ``sagaway.telemetry.metrics.enable_metrics``."""
    from sagaway.telemetry import metrics

    return metrics.enable_metrics(registry)


def disable_metrics() -> None:
    from sagaway.telemetry import metrics

    metrics.disable_metrics()


def metrics_registry() -> Any:
    """The registry the engine counts into (None while metrics are off)."""
    from sagaway.telemetry import metrics

    return metrics.metrics_registry()
