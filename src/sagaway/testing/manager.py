"""Managers set up for tests that skip time."""

from __future__ import annotations

from typing import Any

from sagaway.manager import Manager
from sagaway.testing.clock import FakeClock


def time_skipping_manager(url: str, clock: FakeClock, **options: Any) -> Manager:
    """A Manager on ``url`` whose waits all go through ``clock``.

    Polling and lease heartbeats are set far apart, so ``clock.run_until(...)`` jumps straight
    from one real deadline (a timer, a retry backoff, a signal timeout) to the next.
    """
    options.setdefault("poll_interval", 3600.0)
    options.setdefault("lease_timeout", 10.0**7)
    return Manager(url, clock=clock, **options)
