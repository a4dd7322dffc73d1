"""The background parts of a running Manager (``async with manager``): its Worker, Recovery
Worker, Scheduler and, with ``retention`` set, the retention purger. Started after the store is
open, stopped before it closes; a connected Manager (``manager.connect()``) has none."""

from __future__ import annotations

import asyncio

from sagaway._engine import retention as retention_mod
from sagaway._engine.engine import Engine
from sagaway.recovery import RecoveryWorker
from sagaway.schedules import Scheduler
from sagaway.worker import Worker


class Runners:
    """What runs in the background of this process while its Manager runs workers."""

    def __init__(self) -> None:
        self.worker: Worker | None = None
        self.recovery: RecoveryWorker | None = None
        self.scheduler: Scheduler | None = None
        self.retention: retention_mod.RetentionPurger | None = None
        self.clock_task: asyncio.Task[None] | None = None
        """The engine's server-clock task while the Manager is open (connected or running)."""

    def start(
        self,
        engine: Engine,
        *,
        concurrency: int,
        task_queues: frozenset[str] | None,
        run_versions: frozenset[str | None] | None,
        retention: float | None,
        retention_interval: float,
    ) -> None:
        worker = Worker(engine, concurrency, task_queues, run_versions)
        recovery = RecoveryWorker(engine, worker)
        worker.start()
        recovery.start()
        self.worker, self.recovery = worker, recovery
        self.scheduler = Scheduler(engine)
        self.scheduler.start()
        if retention is not None:
            self.retention = retention_mod.RetentionPurger(
                engine, retention, interval=retention_interval
            )
            self.retention.start()

    async def stop(self, drain_timeout: float, force: asyncio.Event | None) -> None:
        """Stop them all, the Worker last (its executions get ``drain_timeout`` s, or until
        ``force`` is set; it stays ``worker`` while it drains), and the clock task."""
        if self.clock_task is not None:
            self.clock_task.cancel()
            self.clock_task = None
        try:
            if self.retention is not None:
                await self.retention.stop()
            scheduler, self.scheduler = self.scheduler, None
            if scheduler is not None:
                await scheduler.stop()
            if self.recovery is not None:
                await self.recovery.stop()
            if self.worker is not None:
                await self.worker.stop(drain_timeout, force)
        finally:
            self.worker = self.recovery = None
            self.retention = None
