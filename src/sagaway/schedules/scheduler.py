"""Scheduler: starts the executions of schedules at their ticks, in every worker process.

Like the Recovery Worker, it runs beside the Worker of every process that has one. It reads the
schedules, fires the due ones (``ticks.fire``: one process wins each tick, whatever
the number of schedulers) and sleeps, on the engine's clock (the database's, on PostgreSQL),
until the earliest next tick, at most ``poll_interval``, or until a schedule changes (in this
process, or in another one on PostgreSQL and through an Engine Server).
"""

from __future__ import annotations

import asyncio
import logging

from sagaway._engine import cron
from sagaway._engine.engine import Engine
from sagaway._tasks import cancel_and_wait
from sagaway.schedules import ticks
from sagaway.store.base import StoreUnavailable

logger = logging.getLogger(__name__)

STOP_GRACE = 5.0
"""Seconds ``Scheduler.stop`` waits for a scan in flight before it cancels it."""


class Scheduler:
    """Fires the due ticks of every schedule (see the module)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.wake = engine.schedule_wake
        self.started_at = engine.clock.now()
        """Ticks before this time were missed (no scheduler of this process saw them come)."""
        self.fired = 0
        """Ticks whose executions this process started (it won their compare-and-set)."""
        self.rounds = 0
        """Scans done: tests wait on it."""
        self._task: asyncio.Task[None] | None = None
        self._store_down = False
        self._stopping = False

    def start(self) -> None:
        self.started_at = self.engine.clock.now()
        self._task = asyncio.create_task(self._loop(), name="sagaway-scheduler")

    async def stop(self, grace: float = STOP_GRACE) -> None:
        """Let a scan in flight end (at most ``grace`` seconds), then cancel the loop.

        A tick whose start the store is committing is let finish rather than cancelled: it
        lands in the database either way, and a finished call counts it in ``fired`` and logs
        it, where a cancelled one would leave it started but unaccounted for."""
        self._stopping = True  # ends the loop after this scan, even if a driver ate a cancel
        self.wake.set()
        task, self._task = self._task, None
        if task is not None and not task.done():
            await asyncio.wait({task}, timeout=grace)
        await cancel_and_wait(task)

    async def run_once(self) -> float:
        """Fire what is due now; the time (engine clock) of the next tick of any schedule, at
        most ``poll_interval`` from now (other processes may add schedules unannounced)."""
        engine = self.engine
        earliest: float | None = None
        for schedule in await engine.store.list_schedules():
            if schedule.paused:
                continue
            next_at = schedule.next_tick_at
            if next_at <= engine.clock.now():
                try:
                    plan, won = await ticks.fire(engine, schedule, started_at=self.started_at)
                except StoreUnavailable:
                    raise
                except Exception:
                    logger.exception("schedule %s: its tick could not be started", schedule.id)
                    continue
                if won:
                    self.fired += len(plan.ticks)
                    _log_fired(schedule.id, plan)
                next_at = plan.next_tick_at
            earliest = next_at if earliest is None else min(earliest, next_at)
        wake_at = engine.clock.now() + engine.poll_interval
        return wake_at if earliest is None else min(wake_at, earliest)

    async def _loop(self) -> None:
        engine = self.engine
        while not self._stopping:
            self.wake.clear()
            try:
                wake_at = await self.run_once()
            except StoreUnavailable as exc:
                if not self._store_down:
                    logger.warning("scheduler paused: %s", exc, extra={"action": "schedule"})
                self._store_down = True
                wake_at = engine.clock.now() + engine.poll_interval
            except Exception:
                logger.exception("scheduler scan failed; retrying", extra={"action": "schedule"})
                wake_at = engine.clock.now() + engine.poll_interval
            else:
                self._store_down = False
            self.rounds += 1
            if not self._stopping:
                await self._sleep_until(wake_at)

    async def _sleep_until(self, wake_at: float) -> None:
        """Until ``wake_at`` or a wake-up. The wait is measured when the sleep begins (in its
        own task), so time that passed meanwhile is not slept again."""
        clock = self.engine.clock

        async def sleep() -> None:
            await clock.sleep(max(wake_at - clock.now(), 0.0))

        waits = [asyncio.ensure_future(sleep()), asyncio.ensure_future(self.wake.wait())]
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiting in waits:
                waiting.cancel()


def _log_fired(schedule_id: str, plan: ticks.Plan) -> None:
    if plan.ticks:
        logger.info(
            "schedule %s: started %d execution(s), next tick at %s",
            schedule_id,
            len(plan.ticks),
            cron.label(plan.next_tick_at),
            extra={"action": "schedule"},
        )
