"""The SQLite store's jobs: work for its writer thread, run as one transaction per batch, and
the delivery of their outcomes to the event loops that wait for them.

A batch runs its jobs one after the other in one transaction. Usually none fails, and the batch
commits as it ran. When one raises, the transaction is rolled back and the batch runs again with
each job in a savepoint of its own, so only the failed job's writes are undone. (A savepoint
around every job, every time, cost two more statements per job, each a release of the GIL that
another thread may keep for a whole switch interval.) Jobs are functions of the connection
alone, so running one again after a rollback is the same as running it once.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from sagaway import errors

T = TypeVar("T")


class Call(Protocol):
    """The store's way to run ``fn`` as one job of its writer (``SQLiteStore._call``): what the
    verbs' collaborators (schedules, audit, queue limits) are given."""

    async def __call__(self, fn: Callable[[sqlite3.Connection], T]) -> T: ...


Outcome = tuple[Any, BaseException | None]
"""A job's result, or the exception its caller gets."""
Delivered = list[tuple["asyncio.Future[Any]", Any, BaseException | None]]
"""Outcomes on their way to the futures of one event loop."""


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


def deliver_all(outcomes: Delivered) -> None:
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


def run_together(conn: sqlite3.Connection, batch: list[Job]) -> list[Outcome] | None:
    """Run the batch in one transaction and commit it; None (rolled back) if a job raised
    and there were others, whose writes must not be lost with it."""
    conn.execute("BEGIN IMMEDIATE")
    outcomes: list[Outcome] = []
    for job in batch:
        try:
            outcomes.append((job.fn(conn), None))
        except BaseException as exc:  # the writer thread must live on
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            return [(None, as_exception(exc))] if len(batch) == 1 else None
    conn.execute("COMMIT")
    return outcomes


class BusyTimeout:
    """The writer connection's busy_timeout, changed only when it must: a lone write takes the
    write lock only if it is free (0), a batch waits for it up to the configured time.

    A PRAGMA is prepared anew by SQLite every time it runs, so switching for each lone write
    and back cost two statements and two parses per write; one saga at a time makes only lone
    writes, and a loaded process only batches, so the setting rarely changes. Statements after
    the BEGIN IMMEDIATE of a lone write never wait on a lock: in WAL mode the write lock is
    held and reads use the transaction's snapshot.
    """

    __slots__ = ("_configured_ms", "_conn", "_waits")

    def __init__(self, conn: sqlite3.Connection, configured_ms: int) -> None:
        self._conn = conn
        self._configured_ms = configured_ms
        self._waits = True  # the connector set the configured timeout

    def wait(self) -> None:
        """Wait for locks up to the configured time (before a batch)."""
        if not self._waits:
            self._conn.execute(f"PRAGMA busy_timeout = {self._configured_ms:d}")
            self._waits = True

    def take_only_if_free(self) -> None:
        """Never wait for a lock (a lone write)."""
        if self._waits:
            self._conn.execute("PRAGMA busy_timeout = 0")
            self._waits = False


def run_alone(
    conn: sqlite3.Connection, fn: Callable[[sqlite3.Connection], Any], busy: BusyTimeout
) -> Outcome | None:
    """Run ``fn`` in a transaction of its own, on the caller's thread, if the write lock is
    free at once: None when another process holds it (nothing was done). A failed COMMIT
    raises (``sqlite3.Error``), as in ``run_together``."""
    busy.take_only_if_free()
    try:
        conn.execute("BEGIN IMMEDIATE")
    except sqlite3.Error:
        return None
    try:
        value = fn(conn)
    except BaseException as exc:  # the caller gets it, as it would from the writer thread
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        return None, as_exception(exc)
    conn.execute("COMMIT")
    return value, None


def unwrap(outcome: Outcome) -> Any:
    """The job's result, or its error raised."""
    value, exc = outcome
    if exc is not None:
        raise exc
    return value


def run_isolated(conn: sqlite3.Connection, batch: list[Job]) -> list[Outcome]:
    """Run the batch in one transaction, each job in a savepoint: a job that raises has its
    own writes undone, and the others commit."""
    conn.execute("BEGIN IMMEDIATE")
    outcomes: list[Outcome] = []
    for job in batch:
        conn.execute("SAVEPOINT job")
        try:
            value = job.fn(conn)
        except BaseException as exc:  # the writer thread must live on
            conn.execute("ROLLBACK TO job")
            conn.execute("RELEASE job")
            outcomes.append((None, as_exception(exc)))
        else:
            conn.execute("RELEASE job")
            outcomes.append((value, None))
    conn.execute("COMMIT")
    return outcomes


def deliver_batch(
    batch: list[Job],
    outcomes: list[Outcome],
    *,
    home: asyncio.AbstractEventLoop | None,
    settle: Callable[[Delivered], None],
) -> None:
    """Hand each job's outcome to its event loop: one wake-up per loop for the whole batch;
    the store's own loop (``home``) is given its outcomes through ``settle``."""
    by_loop: dict[asyncio.AbstractEventLoop, Delivered] = {}
    for job, (value, error) in zip(batch, outcomes, strict=True):
        by_loop.setdefault(job.loop, []).append((job.future, value, error))
    for loop, delivered in by_loop.items():
        loop.call_soon_threadsafe(settle if loop is home else deliver_all, delivered)


def as_exception(exc: BaseException) -> Exception:
    """A job's failure as its caller gets it: a BaseException raised in the writer thread (a
    callback's ``SystemExit``, say) would end the thread and leave every later call waiting."""
    if isinstance(exc, Exception):
        return exc
    failure = errors.SagawayError(f"a store operation raised {type(exc).__name__}: {exc}")
    failure.__cause__ = exc
    return failure
