"""An asyncio event loop run in a daemon thread of its own, for a blocking client
(``sync.SyncClient``): start it, hand it calls, wait for their outcomes in the caller's thread."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Awaitable, Callable
from typing import TypeVar

from sagaway import errors

T = TypeVar("T")


def start(name: str) -> tuple[asyncio.AbstractEventLoop, threading.Thread]:
    """A new loop, run by a new daemon thread called ``name``."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=_run_loop, args=(loop,), name=name, daemon=True)
    thread.start()
    return loop, thread


def _run_loop(loop: asyncio.AbstractEventLoop) -> None:
    """The thread: run the loop until it is stopped (``loop.stop``), then tidy up."""
    asyncio.set_event_loop(loop)
    try:
        loop.run_forever()
        pending = asyncio.all_tasks(loop)
        for task in pending:
            task.cancel()
        if pending:
            loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        loop.run_until_complete(loop.shutdown_asyncgens())
    finally:
        loop.close()


async def invoke(make: Callable[[], Awaitable[T]]) -> T:
    # The awaitable is built in the loop's thread: nothing of the Manager runs elsewhere.
    return await make()


def wait(
    future: concurrent.futures.Future[T], limit: float | None, closed: Callable[[], bool]
) -> T:
    """The outcome of ``future`` (a call on the loop), waited for ``limit`` seconds at most
    (then ``TimeoutError``, and the call is cancelled); ``closed()``: whether a cancellation
    came from the client closing (``ManagerStateError``)."""
    try:
        return future.result(limit)
    except concurrent.futures.CancelledError:
        if closed():
            raise errors.ManagerStateError("the SyncClient closed during the call") from None
        raise
    except BaseException as exc:
        if future.done():
            raise  # the call's own outcome, as the async API raises it
        future.cancel()  # our wait ended first (a timeout, Ctrl-C): stop the call too
        if isinstance(exc, TimeoutError):
            raise TimeoutError(f"no answer within {limit} s") from None
        raise
