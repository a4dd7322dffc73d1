"""The engine's only source of time.

Everything that waits (retry backoff, activity timeouts, leases, recovery scans, result polling)
goes through a ``Clock`` so tests can swap in ``sagaway.testing.FakeClock`` and skip time.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from typing import Protocol


class Clock(Protocol):
    """Wall time in epoch seconds and the ability to wait for it."""

    def now(self) -> float:
        """Current time, epoch seconds."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Wait ``seconds`` of this clock's time."""
        ...


async def wait_event_or_sleep(event: asyncio.Event, clock: Clock, seconds: float) -> None:
    """Return when ``event`` is set or ``seconds`` of ``clock`` time have passed."""
    if event.is_set():
        return
    if _TIMEOUT_OK and _real_time(clock):
        # The common case (every result() waits here): a timer on this task, no extra tasks.
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(max(seconds, 0.0)):
                await event.wait()
        return
    waiter = asyncio.ensure_future(event.wait())
    sleeper = asyncio.ensure_future(clock.sleep(seconds))
    try:
        await asyncio.wait({waiter, sleeper}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        waiter.cancel()
        sleeper.cancel()


# asyncio.timeout() mishandles a task that was cancelled and uncancelled before 3.11.3.
_TIMEOUT_OK = sys.version_info >= (3, 11, 3)


def _real_time(clock: Clock) -> bool:
    """True if ``clock`` sleeps with the event loop's own timers (not a test clock)."""
    while isinstance(clock, OffsetClock):
        clock = clock.local
    return type(clock) is SystemClock


class SystemClock:
    """The real clock."""

    def now(self) -> float:
        return time.time()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(seconds, 0.0))


class OffsetClock:
    """Another clock's time plus an offset: the database server's time, read locally.

    Lease expiries and timers are compared across machines; taking them all from the database
    server's clock means a worker whose own clock is off can neither steal a live lease nor fire
    a timer early. Waiting still goes through the local clock (only durations matter there).
    """

    def __init__(self, local: Clock, offset: float) -> None:
        self.local = local
        self.offset = offset

    def now(self) -> float:
        return self.local.now() + self.offset

    async def sleep(self, seconds: float) -> None:
        await self.local.sleep(seconds)
