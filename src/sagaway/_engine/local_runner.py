"""What the Engine holds of its own process: the Worker it dispatches to (``LocalRunner``) and the
per-process limits of activity queues (``QueueLimiter``)."""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
from collections.abc import AsyncIterator
from typing import Protocol

from sagaway.clock import Clock
from sagaway.registry import Queue
from sagaway.store.records import Lease, StepRecord, WorkflowRecord


class PrioritySlots:
    """``n`` slots; waiters get a freed one by priority (higher first), then first come."""

    def __init__(self, n: int) -> None:
        self._free = n
        self._waiters: list[tuple[int, int, asyncio.Future[None]]] = []
        self._arrivals = itertools.count()

    async def acquire(self, priority: int) -> None:
        while self._waiters and self._waiters[0][2].done():
            heapq.heappop(self._waiters)  # cancelled while waiting
        if self._free and not self._waiters:
            self._free -= 1
            return
        future = asyncio.get_running_loop().create_future()
        heapq.heappush(self._waiters, (-priority, next(self._arrivals), future))
        try:
            await future
        except asyncio.CancelledError:
            if future.done() and not future.cancelled():
                self.release()  # given a slot as it was cancelled: to the next one
            raise

    def release(self) -> None:
        while self._waiters:
            _, _, future = heapq.heappop(self._waiters)
            if not future.done():  # a cancelled waiter is skipped
                future.set_result(None)
                return
        self._free += 1

    @contextlib.asynccontextmanager
    async def held(self, priority: int) -> AsyncIterator[None]:
        await self.acquire(priority)
        try:
            yield
        finally:
            self.release()


class QueueLimiter:
    """Per-process concurrency and rate limit of one activity queue: waiting calls go by
    priority, then first come, for the next start as for a free slot."""

    def __init__(self, queue: Queue, clock: Clock) -> None:
        self._sem = PrioritySlots(queue.concurrency) if queue.concurrency else None
        self._interval = 1.0 / queue.rate_per_second if queue.rate_per_second else 0.0
        self._starts = PrioritySlots(1)
        """Held by the call waiting for the next start, one at a time."""
        self._next_start = 0.0
        self._clock = clock

    @contextlib.asynccontextmanager
    async def slot(self, priority: int = 3) -> AsyncIterator[None]:
        if self._interval:
            async with self._starts.held(priority):
                now = self._clock.now()
                start = max(now, self._next_start)
                self._next_start = start + self._interval
                if start > now:
                    await self._clock.sleep(start - now)
        if self._sem is None:
            yield
            return
        async with self._sem.held(priority):
            yield


class LocalRunner(Protocol):
    """What the Engine needs from the Worker of its process (the Worker implements it)."""

    def accepts(self, task_queue: str, code_version: str | None) -> bool:
        """Whether a workflow of ``task_queue`` and ``code_version`` started here may run here
        at once."""
        ...

    def dispatch(
        self, record: WorkflowRecord, lease: Lease, steps: list[StepRecord] | None
    ) -> None:
        """Run an execution this process has just claimed."""
        ...

    def is_running(self, run_id: str) -> bool: ...

    def cancel(self, run_id: str) -> None:
        """Stop an execution that was ended by request (cancel, terminate)."""
        ...

    def ended_elsewhere(self, run_id: str) -> None:
        """Another process reports ``run_id`` ended: stop it here unless it is ending itself."""
        ...

    def cancel_requested(self, run_id: str, reason: str | None) -> None:
        """A cancel request was recorded for ``run_id`` (``reason`` None: not known here, read
        it): the execution, if it runs here, sees ``Cancelled`` at its next durable call."""
        ...

    def paused(self, run_id: str) -> None:
        """``run_id`` was paused: if it runs here, it stops before its next durable call and
        gives its lease and slot up (``pausing``)."""
        ...
