"""Times from the database server's clock, so that processes on several hosts agree.

Leases, timers and due times are compared across processes. On a shared server (PostgreSQL) the
engine measures the offset between the local clock and the server's once, before it is built,
and reads every time through an ``OffsetClock``; a task measures it again now and then, since
local clocks drift and get stepped by NTP. An embedded store (SQLite) has no server clock.
"""

from __future__ import annotations

import asyncio
import logging

from sagaway.clock import Clock, OffsetClock, SystemClock
from sagaway.store.base import Store

logger = logging.getLogger(__name__)


async def server_clock(store: Store, local: Clock) -> tuple[Clock, asyncio.Task[None] | None]:
    """The clock an Engine over ``store`` uses, and the task keeping it in step (if any)."""
    offset = await _measure_offset(store, local)
    if offset is None:
        return local, None
    clock = OffsetClock(local, offset)
    if not isinstance(local, SystemClock):
        return clock, None  # a test clock does not drift
    return clock, asyncio.create_task(_refresh_offset(store, clock), name="sagaway-clock")


def check_lease_timeout(store: object, lease_timeout: float) -> None:
    """Refuse (ValueError) a lease_timeout longer than the Engine Server behind ``store``
    grants: it would shorten every lease, and this process would act on a lease it no longer
    holds."""
    while store is not None:
        limit = getattr(store, "max_lease", None)
        if isinstance(limit, float) and lease_timeout > limit:
            raise ValueError(
                f"lease_timeout={lease_timeout:g} s is longer than the Engine Server grants "
                f"(sagaway server --max-lease {limit:g}): lower it, or raise the server's limit"
            )
        store = getattr(store, "inner", None)


async def _measure_offset(store: Store, local: Clock) -> float | None:
    before = local.now()
    server = await store.server_time()
    after = local.now()
    return None if server is None else server - (before + after) / 2


async def _refresh_offset(store: Store, clock: OffsetClock, every: float = 60.0) -> None:
    while True:
        await clock.local.sleep(every)
        try:
            offset = await _measure_offset(store, clock.local)
        except Exception:
            logger.warning("could not read the database clock; keeping the last offset")
            continue
        if offset is not None:
            clock.offset = offset
