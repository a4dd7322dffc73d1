"""The engine's only source of time.

Everything that waits (retry backoff, activity timeouts, leases, recovery scans, result polling)
goes through a ``Clock`` so tests can swap in ``sagaway.testing.FakeClock`` and skip time.
"""

from __future__ import annotations

import asyncio
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


class SystemClock:
    """The real clock."""

    def now(self) -> float:
        return time.time()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(seconds, 0.0))
