"""The SQLite store's writer: WAL, busy_timeout, IMMEDIATE transactions, group commit.

Database work runs on a dedicated writer thread with one connection. Requests queue up while a
transaction commits; the thread then runs everything queued in *one* transaction (a request that
fails is rolled back alone: see ``jobs``). Under load this turns many workflows' step records
into one commit (group commit). When nothing else is going on in the process, a small write (a
start, a step, an end) runs on the event loop's thread instead, on the same connection under the
same lock, and saves the two thread hand-offs. Several processes may share the file: SQLite's
write lock and busy_timeout serialise them.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar, cast

from sagaway import errors, observe
from sagaway.store.contract import DatabaseNotFound
from sagaway.store.sqlite.checkpoint import Checkpointer
from sagaway.store.sqlite.connect import Connector, is_file
from sagaway.store.sqlite.jobs import (
    BusyTimeout,
    Delivered,
    Job,
    Outcome,
    deliver,
    deliver_all,
    deliver_batch,
    run_alone,
    run_isolated,
    run_together,
    unwrap,
)

T = TypeVar("T")

_MAX_BATCH = 512


class Writer:
    """The SQLite store's connection and writer thread: ``open``/``close`` and ``_call``, which
    runs a function of the connection as one job of a group transaction."""

    def __init__(self, url: str, *, create: bool = True) -> None:
        self.url = url
        self._connector = Connector.from_url(url, create=create)
        self._path = self._connector.path
        # The writer thread takes lists of jobs. A call made while the writer has none of this
        # loop's jobs goes at once, alone; calls made while it is busy are handed over
        # together at the end of the loop's turn (one wake-up of the thread, not one per call).
        self._jobs: queue.SimpleQueue[list[Job] | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._handing: list[Job] | None = None
        self._in_flight = 0  # jobs of this loop handed over, their outcomes not yet delivered
        self._conn: sqlite3.Connection | None = None
        self._lone_writes = False
        self._writing = threading.Lock()
        self.checkpointer: Checkpointer | None = None  # while open (see checkpoint)

    # ------------------------------------------------------------------ lifecycle

    async def open(self) -> None:
        if self._thread is not None:
            return
        if not self._connector.create and not is_file(self._path):
            raise DatabaseNotFound(self.url)
        if self._path != ":memory:":
            Path(self._path).parent.mkdir(parents=True, exist_ok=True)
        ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        loop = asyncio.get_running_loop()
        self._jobs = queue.SimpleQueue()  # a fresh queue: no stop signal left from before
        self._loop, self._handing, self._in_flight = loop, None, 0
        self._thread = threading.Thread(
            target=self._run, args=(loop, ready), name=f"sagaway-sqlite:{self._path}", daemon=True
        )
        self._thread.start()
        try:
            await ready
        except BaseException:
            # Failed or cancelled: stop the thread (it may have opened fine) without blocking.
            thread, self._thread = self._thread, None
            self._jobs.put(None)
            await asyncio.shield(asyncio.to_thread(thread.join))
            raise

    async def close(self) -> None:
        thread = self._thread
        if thread is None:
            return
        self._thread = None
        self._hand_over()  # calls of this turn of the loop still run
        self._jobs.put(None)
        await asyncio.to_thread(thread.join)

    def _run(self, loop: asyncio.AbstractEventLoop, ready: asyncio.Future[None]) -> None:
        try:
            conn = self._connector.writer()
            self._connector.migrate(conn)
        except BaseException as exc:
            loop.call_soon_threadsafe(deliver, ready, None, exc)
            return
        checkpointer = self.checkpointer = Checkpointer(self._connector.checkpointer, self._path)
        self._busy = BusyTimeout(conn, self._connector.busy_timeout_ms)
        # Lone writes rely on WAL (only their BEGIN can wait for a lock); a file SQLite left in
        # another journal mode (no shared memory for WAL) always goes through the writer.
        self._lone_writes = str(conn.execute("PRAGMA journal_mode").fetchone()[0]).lower() == "wal"
        self._conn = conn
        loop.call_soon_threadsafe(deliver, ready, None, None)
        try:
            while True:
                jobs = self._jobs.get()
                if jobs is None:
                    break
                batch = list(jobs)
                stop = False
                while len(batch) < _MAX_BATCH:
                    try:
                        more = self._jobs.get_nowait()
                    except queue.Empty:
                        break
                    if more is None:
                        stop = True
                        break
                    batch.extend(more)
                with self._writing:
                    changes = conn.total_changes
                    self._run_batch(conn, batch)
                    self._wrote(conn, changes)
                if stop:
                    break
        finally:
            with self._writing:
                self._conn = None
            checkpointer.stop()
            conn.close()  # the last connection to close checkpoints what is left

    def _run_batch(self, conn: sqlite3.Connection, batch: list[Job]) -> None:
        began = time.perf_counter()
        try:
            self._busy.wait()  # a batch waits for another process's lock
            outcomes = run_together(conn, batch)
            if outcomes is None:  # a job failed: again, each in a savepoint undone alone
                outcomes = run_isolated(conn, batch)
        except sqlite3.Error as db_error:
            outcomes = [(None, self._failed(conn, db_error))] * len(batch)
        if observe.observers:
            observe.batch_written("transaction", len(batch), time.perf_counter() - began)
        deliver_batch(batch, outcomes, home=self._loop, settle=self._settle)

    def _failed(self, conn: sqlite3.Connection, db_error: sqlite3.Error) -> errors.SagawayError:
        """The transaction rolled back; what its callers get."""
        with contextlib.suppress(sqlite3.Error):
            conn.execute("ROLLBACK")
        failure = errors.SagawayError(f"SQLite transaction failed on {self._path}: {db_error}")
        failure.__cause__ = db_error
        return failure

    async def _call(self, fn: Callable[[sqlite3.Connection], T], alone: bool = False) -> T:
        """``fn(conn)``'s result, run in a write transaction (its error raised). ``alone``: a
        small write that may run on this thread when nothing else is going on (``_idle``)."""
        if self._thread is None:
            raise errors.ManagerStateError("the SQLite store is not open")
        loop = asyncio.get_running_loop()
        if alone and self._idle(loop):
            outcome = self._run_here(fn)
            if outcome is not None:
                return cast(T, unwrap(outcome))
        future: asyncio.Future[T] = loop.create_future()
        job = Job(fn, future, loop)
        if loop is not self._loop:  # a call from another event loop goes at once
            self._jobs.put([job])
        elif self._handing is not None:
            self._handing.append(job)
        elif self._in_flight == 0:  # the writer has nothing of ours: no reason to wait
            self._in_flight = 1
            self._jobs.put([job])
        else:
            self._handing = [job]
            loop.call_soon(self._hand_over)
        return await future

    def _idle(self, loop: asyncio.AbstractEventLoop) -> bool:
        """Nothing to batch a call with: no call of this loop is with the writer or on its way
        to it, and no other callback is ready to run on the loop (asyncio's ready queue; a loop
        without one, such as uvloop's, always goes through the writer). One saga at a time
        then waits for two thread hand-offs per write that it need not."""
        return (
            self._lone_writes
            and loop is self._loop
            and self._in_flight == 0
            and self._handing is None
            and not getattr(loop, "_ready", True)
        )

    def _run_here(self, fn: Callable[[sqlite3.Connection], Any]) -> Outcome | None:
        """Run ``fn`` in a transaction of its own on this thread; None when the writer thread
        is busy (with another loop's work) or another process holds the write lock: the call
        then goes through the writer, which waits for it. Blocks the loop for one small
        transaction (no waiting on the lock: busy_timeout stays 0 from a lone write to the next
        batch; in WAL mode only BEGIN IMMEDIATE can wait)."""
        if not self._writing.acquire(blocking=False):
            return None
        try:
            conn = self._conn
            if conn is None:
                return None
            began, changes = time.perf_counter(), conn.total_changes
            try:
                outcome = run_alone(conn, fn, self._busy)
            except sqlite3.Error as db_error:
                outcome = None, self._failed(conn, db_error)
            self._wrote(conn, changes)
            if observe.observers and outcome is not None:
                observe.batch_written("transaction", 1, time.perf_counter() - began)
            return outcome
        finally:
            self._writing.release()

    def _wrote(self, conn: sqlite3.Connection, changes: int) -> None:
        """After a transaction: if it changed rows, a checkpoint is worth running soon (a
        process that only reads never starts the checkpointer)."""
        if conn.total_changes != changes and self.checkpointer is not None:
            self.checkpointer.written()

    def _hand_over(self) -> None:
        """Give the writer thread the calls made in this turn of the event loop."""
        jobs, self._handing = self._handing, None
        if jobs:
            self._in_flight += len(jobs)
            self._jobs.put(jobs)

    def _settle(self, delivered: Delivered) -> None:
        """Outcomes of this loop's jobs, on this loop."""
        self._in_flight -= len(delivered)
        deliver_all(delivered)
