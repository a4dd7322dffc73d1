"""Prometheus metrics of the engine (``pip install 'sagaway[metrics]'``).

``enable_metrics()`` installs an observer (``sagaway.observe``) that counts what this process
does into a ``CollectorRegistry``: workflows started, ended and suspended by workflow name,
activity and compensation attempts with their latency by name and outcome, recovery takeovers,
lost leases, and the size and duration of the store's batched writes. The number of executions
in each status (WAITING among them) is a gauge read from the database: ``refresh_statuses``, or
``StatusPoller`` every few seconds. ``sagaway worker --metrics-port`` and ``sagaway ui`` serve
the registry at ``/metrics``; an application that serves its own mounts ``metrics_registry()``.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from sagaway import observe
from sagaway._tasks import cancel_and_wait
from sagaway.states import WorkflowStatus

try:
    import prometheus_client
    from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
except ImportError as _missing:  # pragma: no cover - exercised by the extra's absence
    raise ImportError(
        "metrics need prometheus-client: pip install 'sagaway[metrics]'"
    ) from _missing

if TYPE_CHECKING:
    from sagaway.manager import Manager

logger = logging.getLogger(__name__)

_SIZE_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
_WRITE_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
_WAIT_BUCKETS = (1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0)


class MetricsObserver(observe.Observer):
    """Counts the engine's reports into Prometheus metrics of one registry."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        r = registry
        self._count_workflows(r)
        self._count_attempts(r)
        self._count_ownership(r)
        self._count_store_writes(r)
        self.workflows = Gauge(
            "sagaway_workflows",
            "Current executions in the database by status (WAITING, RUNNING, ...), as last "
            "read by refresh_statuses.",
            ["status"],
            registry=r,
        )
        # Label lookups cost a lock and a dict each: keep the children of hot label sets.
        self._attempt_children: dict[tuple[str, str, str], tuple[Any, Any]] = {}
        self._batch_children: dict[str, tuple[Any, Any]] = {}

    def _count_workflows(self, r: CollectorRegistry) -> None:
        """Executions started, ended and suspended, by workflow."""
        self.started = Counter(
            "sagaway_workflows_started",
            "Workflow executions created by this process (children, schedule ticks and forks "
            "included).",
            ["workflow"],
            registry=r,
        )
        self.ended = Counter(
            "sagaway_workflows_ended",
            "Workflow executions ended by this process, by status "
            "(COMPLETED, FAILED, CANCELLED, TERMINATED).",
            ["workflow", "status"],
            registry=r,
        )
        self.suspended = Counter(
            "sagaway_workflows_suspended",
            "Runs that stopped SUSPENDED in this process (recovery retries them).",
            ["workflow"],
            registry=r,
        )

    def _count_attempts(self, r: CollectorRegistry) -> None:
        """Attempts of activities and compensations, and their latency."""
        self.attempts = Counter(
            "sagaway_activity_attempts",
            "Attempts of activities and compensations, by outcome "
            "(completed, failed, retrying, error, interrupted).",
            ["activity", "kind", "outcome"],
            registry=r,
        )
        self.attempt_seconds = Histogram(
            "sagaway_activity_attempt_duration_seconds",
            "How long each attempt of an activity or compensation took.",
            ["activity", "kind", "outcome"],
            registry=r,
        )
        self.compensations = Counter(
            "sagaway_compensations",
            "Compensations that ran to completion.",
            ["activity"],
            registry=r,
        )

    def _count_ownership(self, r: CollectorRegistry) -> None:
        """Executions taken over, and lost to another owner."""
        self.takeovers = Counter(
            "sagaway_recovery_takeovers",
            "Executions this process took over after their owner's lease expired.",
            ["workflow"],
            registry=r,
        )
        self.lease_losses = Counter(
            "sagaway_lease_losses",
            "Executions this process stopped because another process owns them now.",
            ["workflow"],
            registry=r,
        )

    def _count_store_writes(self, r: CollectorRegistry) -> None:
        """The store's batched writes: their size and duration."""
        self.batch_size = Histogram(
            "sagaway_store_batch_size",
            "Requests written together in one statement or transaction (group commit).",
            ["operation"],
            buckets=_SIZE_BUCKETS,
            registry=r,
        )
        self.write_seconds = Histogram(
            "sagaway_store_write_duration_seconds",
            "How long one batched write took.",
            ["operation"],
            buckets=_WRITE_BUCKETS,
            registry=r,
        )
        self.connection_waits = Histogram(
            "sagaway_store_connection_wait_seconds",
            "Waits over a second for a pooled database connection (pool or server exhausted).",
            buckets=_WAIT_BUCKETS,
            registry=r,
        )

    def workflow_started(self, name: str, key: str) -> None:
        self.started.labels(name).inc()

    def workflow_ended(self, name: str, key: str, status: str) -> None:
        self.ended.labels(name, status).inc()

    def workflow_suspended(self, name: str, key: str) -> None:
        self.suspended.labels(name).inc()

    def took_over(self, name: str, key: str, previous_owner: str) -> None:
        self.takeovers.labels(name).inc()

    def lease_lost(self, name: str, key: str) -> None:
        self.lease_losses.labels(name).inc()

    def attempt_ended(self, name: str, outcome: str, seconds: float, *, compensation: bool) -> None:
        kind = "compensation" if compensation else "activity"
        labels = (name, kind, outcome)
        children = self._attempt_children.get(labels)
        if children is None:
            children = (self.attempts.labels(*labels), self.attempt_seconds.labels(*labels))
            self._attempt_children[labels] = children
        children[0].inc()
        children[1].observe(seconds)
        if compensation and outcome == "completed":
            self.compensations.labels(name).inc()

    def batch_written(self, operation: str, size: int, seconds: float) -> None:
        children = self._batch_children.get(operation)
        if children is None:
            children = (self.batch_size.labels(operation), self.write_seconds.labels(operation))
            self._batch_children[operation] = children
        children[0].observe(size)
        children[1].observe(seconds)

    def connection_waited(self, seconds: float) -> None:
        self.connection_waits.observe(seconds)

    def set_statuses(self, counts: dict[WorkflowStatus, int]) -> None:
        for status in WorkflowStatus:
            self.workflows.labels(status.value).set(counts.get(status, 0))


_installed: observe.Installed[MetricsObserver] = observe.Installed()


def enable_metrics(registry: CollectorRegistry | None = None) -> CollectorRegistry:
    """Count the engine's work in this process into ``registry`` and return it.

    None: a registry of Sagaway's own (serve it, or pass ``prometheus_client.REGISTRY`` to
    count into the default one). Calling it again returns the registry already in use.
    """
    with _installed.lock:
        current = _installed.current
        if current is not None:
            if registry is not None and registry is not current.registry:
                raise ValueError(
                    "metrics are already enabled with another registry; call "
                    "disable_metrics() first"
                )
            return current.registry
        observer = MetricsObserver(registry if registry is not None else CollectorRegistry())
        _installed.put(observer)
        return observer.registry


def disable_metrics() -> None:
    """Stop counting (the registry keeps the values counted so far)."""
    _installed.clear()


def metrics_registry() -> CollectorRegistry | None:
    """The registry the engine counts into, None while metrics are off."""
    current = _installed.current
    return None if current is None else current.registry


def exposition() -> tuple[bytes, str]:
    """The current metrics in Prometheus' text format, and its content type."""
    registry = metrics_registry()
    if registry is None:
        raise RuntimeError("metrics are not enabled: call sagaway.telemetry.enable_metrics()")
    return prometheus_client.generate_latest(registry), prometheus_client.CONTENT_TYPE_LATEST


async def refresh_statuses(manager: Manager) -> None:
    """Read how many executions are in each status and set the ``sagaway_workflows`` gauge."""
    current = _installed.current
    if current is None:
        raise RuntimeError("metrics are not enabled: call sagaway.telemetry.enable_metrics()")
    current.set_statuses(await manager.count_workflows())


class StatusPoller:
    """Refreshes the status gauge every ``interval`` seconds while running (one count query
    per refresh: keep the interval at scrape scale, not lower)."""

    def __init__(self, manager: Manager, interval: float = 15.0) -> None:
        if interval <= 0:
            raise ValueError(f"interval must be positive, not {interval}")
        self.manager = manager
        self.interval = interval
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._loop(), name="sagaway-status-gauge")

    async def stop(self) -> None:
        task, self._task = self._task, None
        await cancel_and_wait(task)

    async def _loop(self) -> None:
        from sagaway.manager import ManagerState

        while True:
            if self.manager.state is ManagerState.CLOSED:
                await asyncio.sleep(0.1)  # started with the Manager: wait until it is open
                continue
            try:
                await refresh_statuses(self.manager)
            except Exception as exc:  # the database is away: keep the last values
                logger.warning("could not refresh the workflow status gauge: %s", exc)
            await asyncio.sleep(self.interval)


def serve_metrics(port: int, host: str = "127.0.0.1") -> int:
    """Serve ``/metrics`` over HTTP from a background thread; returns the port (0: any)."""
    registry = metrics_registry()
    if registry is None:
        registry = enable_metrics()
    server, _thread = prometheus_client.start_http_server(port, addr=host, registry=registry)
    return int(server.server_address[1])
