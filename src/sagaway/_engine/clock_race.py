"""Race an awaitable against a timer on the engine's clock (a fake one in tests)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sagaway.clock import Clock


async def finish_within(work: Awaitable[Any], seconds: float, clock: Clock) -> tuple[bool, Any]:
    """Await ``work`` for at most ``seconds`` of ``clock`` time: ``(True, its result)``, or
    ``(False, None)`` when the time ran out first, ``work``'s task then cancelled (a thread
    running a sync activity cannot be stopped: it runs on, its result discarded). Both are
    cancelled if the caller is."""
    task = asyncio.ensure_future(work)
    timer = asyncio.ensure_future(clock.sleep(seconds))
    try:
        done, _ = await asyncio.wait({task, timer}, return_when=asyncio.FIRST_COMPLETED)
    except BaseException:
        task.cancel()
        timer.cancel()
        raise
    if task in done:
        timer.cancel()
        return True, task.result()
    task.cancel()
    return False, None
