"""Retention: ended workflows are deleted once they are older than a retention period.

``Manager.purge`` (and ``sagaway purge``) deletes them on request; ``Manager(retention=...)``
runs ``RetentionPurger`` beside the Worker, which purges now and then in the background. Either
way the work goes in batches, each one short transaction (``Store.purge_ended``), so workers are
never locked out for long, and a live execution is never touched, nor an ended one whose outcome
a live one may still read (see docs/retention.md). A purged key is free again: a start under it
creates a new execution.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Collection

from sagaway._engine.engine import Engine
from sagaway._engine.purging import as_seconds
from sagaway._tasks import cancel_and_wait
from sagaway.states import WorkflowStatus
from sagaway.store.base import StoreUnavailable

__all__ = ["DEFAULT_BATCH", "DEFAULT_INTERVAL", "RetentionPurger", "as_seconds"]

logger = logging.getLogger(__name__)

DEFAULT_BATCH = 500
"""Executions deleted per transaction."""
DEFAULT_INTERVAL = 3600.0
"""Seconds between background purges."""
FIRST_DELAY = 60.0
"""Seconds after the Manager opens before the first background purge (at most the interval):
soon, but not in the rush of a process starting."""


@dataclasses.dataclass(eq=False)
class RetentionPurger:
    """Purges, every ``interval`` seconds, the executions that ended more than ``retention``
    seconds ago. Errors are logged and the next round tries again; it never stops the worker."""

    engine: Engine
    retention: float
    _: dataclasses.KW_ONLY
    interval: float = DEFAULT_INTERVAL
    batch_size: int = DEFAULT_BATCH
    statuses: Collection[WorkflowStatus] | None = None
    rounds: int = dataclasses.field(default=0, init=False)
    """Background purges finished (with or without an error): tests wait on it."""
    purged: int = dataclasses.field(default=0, init=False)
    """Executions purged by this purger so far."""
    round_done: asyncio.Event = dataclasses.field(default_factory=asyncio.Event, init=False)
    """Set after each background purge."""
    _task: asyncio.Task[None] | None = dataclasses.field(default=None, init=False)

    def start(self) -> None:
        self._task = asyncio.create_task(self._loop(), name="sagaway-retention")

    async def stop(self) -> None:
        task, self._task = self._task, None
        await cancel_and_wait(task)

    async def run_once(self) -> int:
        """One purge now; how many executions it deleted."""
        purged = await self.engine.purge(
            self.retention,
            statuses=self.statuses,
            batch_size=self.batch_size,
            dry_run=False,
            background=True,
        )
        self.purged += purged
        if purged:
            logger.info(
                "retention: purged %d workflows that ended more than %gs ago",
                purged,
                self.retention,
                extra={"action": "purge"},
            )
        return purged

    async def _loop(self) -> None:
        clock = self.engine.clock
        await clock.sleep(min(FIRST_DELAY, self.interval))
        while True:
            try:
                await self.run_once()
            except StoreUnavailable as exc:
                logger.warning(
                    "retention: purge skipped, the database is unavailable (%s); next in %gs",
                    exc,
                    self.interval,
                    extra={"action": "purge"},
                )
            except Exception:
                logger.exception(
                    "retention: purge failed; next in %gs", self.interval, extra={"action": "purge"}
                )
            self.rounds += 1
            self.round_done.set()
            await clock.sleep(self.interval)
