"""The SQLite store's jobs: work for its writer thread, and the delivery of their outcomes to
the event loops that wait for them."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable
from typing import Any


class Job:
    """One call of the store: ``fn`` runs in the writer's transaction, its outcome goes to
    ``future`` on ``loop``."""

    __slots__ = ("fn", "future", "loop")

    def __init__(
        self,
        fn: Callable[[sqlite3.Connection], Any],
        future: asyncio.Future[Any],
        loop: asyncio.AbstractEventLoop,
    ) -> None:
        self.fn = fn
        self.future = future
        self.loop = loop


def deliver_all(outcomes: list[tuple[asyncio.Future[Any], Any, BaseException | None]]) -> None:
    """Deliver a batch's outcomes (one wake-up of the loop for all of them)."""
    for future, result, exc in outcomes:
        deliver(future, result, exc)


def deliver(future: asyncio.Future[Any], result: Any, exc: BaseException | None) -> None:
    """Resolve ``future`` with ``result`` or ``exc``, unless its waiter gave up."""
    if future.done():  # the caller gave up waiting; the work itself is done or rolled back
        return
    if exc is not None:
        future.set_exception(exc)
    else:
        future.set_result(result)
