"""Stopping a background task, written once: cancel it and wait until it has ended."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

logger = logging.getLogger(__name__)

CANCEL_AGAIN_AFTER = 2.0
"""Seconds after which a task still running is cancelled again (see ``cancel_and_wait``)."""


async def cancel_and_wait(
    task: asyncio.Future[Any] | None, *, again_after: float = CANCEL_AGAIN_AFTER
) -> None:
    """Cancel ``task`` (None: nothing to stop) and wait for its end; its ``CancelledError``
    is the expected end and is not raised here, another error it ended with is.

    A cancel can be lost: Python 3.11's ``asyncio.wait_for`` (which connection pools use)
    drops one that arrives as the future it waits for completes, and the task then runs on,
    a background loop until its next round, maybe an hour. So a task not ended within
    ``again_after`` seconds is cancelled again. The caller's own cancellation is not swallowed.
    """
    if task is None:
        return
    task.cancel()
    await asyncio.wait({task}, timeout=again_after)
    while not task.done():
        name = task.get_name() if isinstance(task, asyncio.Task) else repr(task)
        logger.info(
            "task %s still runs %gs after its cancel: cancelling it again", name, again_after
        )
        task.cancel()
        await asyncio.wait({task}, timeout=again_after)
    if not task.cancelled() and task.exception() is not None:
        raise task.exception()  # type: ignore[misc]
