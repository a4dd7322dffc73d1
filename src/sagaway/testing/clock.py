"""FakeClock: virtual time for tests of backoff, timeouts, leases and timers."""

from __future__ import annotations

import asyncio
import heapq
import inspect
import itertools
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")


class FakeClock:
    """A clock that moves only when told to.

    ``sleep`` waits until ``advance`` moves time past its deadline. Tests synchronise on what
    the engine is waiting for (``wait_for_sleep``) instead of sleeping in real time.
    """

    def __init__(self, start: float = 1_750_000_000.0) -> None:
        self._now = start
        self._sleepers: list[tuple[float, int, float, asyncio.Future[None]]] = []
        self._seq = itertools.count()
        self._changed = asyncio.Event()

    def now(self) -> float:
        return self._now

    async def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self._now + seconds, next(self._seq), seconds, future))
        self._changed.set()
        await future

    def pending(self) -> list[tuple[float, float]]:
        """(deadline, requested seconds) of every task sleeping now."""
        return sorted((d, s) for d, _, s, f in self._sleepers if not f.done())

    async def advance(self, seconds: float) -> None:
        """Move time forward, waking every sleeper whose deadline is reached, in order."""
        if seconds < 0:
            raise ValueError("time cannot go back")
        target = self._now + seconds
        while self._sleepers and self._sleepers[0][0] <= target:
            deadline, _, _, future = heapq.heappop(self._sleepers)
            self._now = max(self._now, deadline)
            if not future.done():
                future.set_result(None)
                await asyncio.sleep(0)  # let the woken task run before later deadlines
        self._now = target
        for _ in range(3):
            await asyncio.sleep(0)

    async def wait_for_sleep(
        self, match: Callable[[float], bool] | float, timeout: float = 10.0
    ) -> None:
        """Wait (in real time, up to ``timeout``) until some task sleeps for a matching duration.

        ``match`` is a duration in seconds or a predicate on it.
        """
        predicate = match if callable(match) else (lambda s: abs(s - match) < 1e-9)

        async def found() -> None:
            while not any(predicate(s) for _, s in self.pending()):
                self._changed.clear()
                await self._changed.wait()

        await asyncio.wait_for(found(), timeout)

    async def run_until(
        self,
        awaitable: Awaitable[T],
        *,
        timeout: float = 10.0,
        idle: float = 0.005,
        max_jump: float | None = None,
    ) -> T:
        """Await ``awaitable``, jumping time to the next sleeper's deadline whenever nothing
        happened for ``idle`` real seconds (trio's autojump). ``timeout`` is in real seconds.

        ``max_jump`` caps each jump: time then creeps forward as a real clock would while the
        engine waits on its database, instead of leaping to the next timer or poll, so a test
        can assert that something happened *without* waiting for a far deadline.
        """
        if max_jump is not None and not max_jump > 0:  # NaN too
            if inspect.iscoroutine(awaitable):
                awaitable.close()  # never to be awaited: no "never awaited" warning
            raise ValueError(f"max_jump must be a positive number of seconds, not {max_jump}")
        task = asyncio.ensure_future(awaitable)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        try:
            while not task.done():
                if loop.time() > deadline:
                    raise TimeoutError(f"not done within {timeout} real seconds")
                await asyncio.wait({task}, timeout=idle)
                pending = self.pending()
                if not task.done() and pending:
                    jump = max(pending[0][0] - self._now, 0.0)
                    await self.advance(jump if max_jump is None else min(jump, max_jump))
            return task.result()
        finally:
            task.cancel()
