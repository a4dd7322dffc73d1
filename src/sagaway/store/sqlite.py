"""SQLite store: WAL, busy_timeout, IMMEDIATE transactions, group commit.

Database work runs on a dedicated writer thread with one connection. Requests queue up while a
transaction commits; the thread then runs everything queued in *one* transaction (a request that
fails is rolled back alone: see ``_sqlite_jobs``). Under load this turns many workflows' step
records into one commit (group commit). When nothing else is going on in the process, a small
write (a start, a step, an end) runs on the event loop's thread instead, on the same connection
under the same lock, and saves the two thread hand-offs. Several processes may share the file:
SQLite's write lock and busy_timeout serialise them.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import queue
import sqlite3
import threading
import time
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any, TypeVar, cast

from sagaway import errors, observe
from sagaway.states import WorkflowStatus
from sagaway.store import (
    _audit,
    _fork,
    _inspect,
    _listing,
    _params,
    _purge,
    _queue_limits,
    _rows,
    _schedules,
    _sqlite_claims,
    _sqlite_signals,
)
from sagaway.store._sqlite_checkpoint import Checkpointer
from sagaway.store._sqlite_connect import Connector, is_file
from sagaway.store._sqlite_jobs import (
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
from sagaway.store.base import CancelPending, CreateResult, DatabaseNotFound
from sagaway.store.records import (
    AttemptErrorRecord,
    AuditNote,
    CancelRequestRecord,
    ForkPayloads,
    Lease,
    ListQuery,
    NewWorkflow,
    SignalRecord,
    StepRecord,
    WorkflowRecord,
)
from sagaway.store.sql import queries

T = TypeVar("T")

_Q = queries("sqlite")
_MAX_BATCH = 512


class SQLiteStore(_queue_limits.SQLiteQueueLimits, _schedules.SQLiteSchedules, _audit.SQLiteAudit):
    """Store on one SQLite file (``create=False``: an existing Sagaway file only, see
    ``open_store``)."""

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
        self.checkpointer: Checkpointer | None = None  # while open (see _sqlite_checkpoint)

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

    async def server_time(self) -> float | None:
        """None: an SQLite file is used from one machine, whose clock every process shares."""
        return None

    async def listen(
        self, callback: Callable[..., object], *, owner: str | None = None, ends: bool = True
    ) -> None:
        """SQLite has no notifications: other processes' changes are seen by polling."""

    # ------------------------------------------------------------------ verbs

    async def create_workflow(
        self,
        new: NewWorkflow,
        *,
        now: float,
        lease: Lease | None,
        replace_live: bool,
        audit: AuditNote | None = None,
    ) -> CreateResult:
        params = _params.create(new, now=now, lease=lease)

        def op(conn: sqlite3.Connection) -> CreateResult:
            result = _create(conn, new, params, now=now, replace_live=replace_live)
            if result.created:
                _audit.write_sqlite(conn, audit, run_id=new.run_id)
            return result

        return await self._call(op, alone=True)

    async def fork_workflow(
        self,
        source_run_id: str,
        *,
        run_id: str,
        key: str,
        key_space: str,
        call_ids: Collection[str],
        now: float,
        code_version: str | None = None,
        payloads: ForkPayloads | None = None,
        audit: AuditNote | None = None,
    ) -> CreateResult | None:
        fork = _fork.fork(
            source_run_id,
            run_id=run_id,
            key=key,
            key_space=key_space,
            call_ids=call_ids,
            now=now,
            code_version=code_version,
            payloads=payloads,
            audit=audit,
        )
        return await self._call(lambda conn: _fork.run_sqlite(conn, fork))

    async def get_workflow(self, key: str) -> WorkflowRecord | None:
        def op(conn: sqlite3.Connection) -> WorkflowRecord | None:
            row = conn.execute(_Q["get_current"], {"key": key}).fetchone()
            return _rows.workflow_from_row(row) if row else None

        return await self._call(op)

    async def get_run(self, run_id: str) -> WorkflowRecord | None:
        def op(conn: sqlite3.Connection) -> WorkflowRecord | None:
            row = conn.execute(_Q["get_run"], {"run_id": run_id}).fetchone()
            return _rows.workflow_from_row(row) if row else None

        return await self._call(op)

    async def list_workflows(
        self, *, status: WorkflowStatus | None, limit: int
    ) -> list[WorkflowRecord]:
        statuses = frozenset(() if status is None else (status,))
        return await self.list_page(ListQuery(limit=limit, statuses=statuses))

    async def load_steps(self, run_id: str) -> list[StepRecord]:
        def op(conn: sqlite3.Connection) -> list[StepRecord]:
            rows = conn.execute(_Q["load_steps"], {"run_id": run_id}).fetchall()
            return [_rows.step_from_row(r) for r in rows]

        return await self._call(op)

    async def load_steps_many(self, run_ids: Collection[str]) -> dict[str, list[StepRecord]]:
        ids = json.dumps(list(run_ids))

        def op(conn: sqlite3.Connection) -> dict[str, list[StepRecord]]:
            found: dict[str, list[StepRecord]] = {}
            for row in conn.execute(_Q["load_steps_many"], {"run_ids": ids}):
                step = _rows.step_from_row(row)
                found.setdefault(step.run_id, []).append(step)
            return found

        return await self._call(op)

    async def record_step(self, step: StepRecord, *, token: str) -> None:
        params = {**_params.step(step), "token": token}

        def op(conn: sqlite3.Connection) -> None:
            if conn.execute(_Q["record_step_owned"], params).rowcount != 1:
                raise errors.LeaseLost(step.run_id)

        await self._call(op, alone=True)

    async def finish_workflow(
        self,
        run_id: str,
        *,
        token: str,
        status: WorkflowStatus,
        result: str | None,
        error: str | None,
        now: float,
        final_step: StepRecord | None = None,
        has_parent: bool = True,
        cancel_seen: bool = False,
    ) -> None:
        params = _params.finish(
            run_id,
            token=token,
            status=status,
            result=result,
            error=error,
            now=now,
            cancel_seen=cancel_seen,
        )
        step_params = _params.step(final_step) if final_step else None

        def op(conn: sqlite3.Connection) -> None:
            if conn.execute(_Q["finish_owned"], params).rowcount != 1:
                pending = conn.execute(_Q["cancel_pending"], params).fetchone()
                if pending is not None:
                    raise CancelPending(run_id, pending[0])
                raise errors.LeaseLost(run_id)
            if step_params is not None:
                conn.execute(_Q["upsert_step"], step_params)
            # Not only a parent: any workflow may have attached to this one as its child.
            conn.execute(_Q["wake_waiters"], {"run_id": run_id, "now": now})

        await self._call(op, alone=True)

    async def suspend_workflow(
        self, run_id: str, *, token: str, error: str, now: float, next_run_at: float
    ) -> None:
        params = _params.suspend(run_id, token=token, error=error, now=now, next_run_at=next_run_at)

        def op(conn: sqlite3.Connection) -> None:
            _fenced(conn, "suspend_owned", params)

        await self._call(op)

    async def release_workflow(self, run_id: str, *, token: str, now: float) -> None:
        def op(conn: sqlite3.Connection) -> None:
            conn.execute(_Q["release_owned"], {"run_id": run_id, "token": token, "now": now})

        await self._call(op)

    async def renew_leases(self, tokens: Collection[str], *, expires_at: float) -> set[str]:
        tokens = list(tokens)

        def op(conn: sqlite3.Connection) -> set[str]:
            kept = set()
            for token in tokens:
                cur = conn.execute(_Q["renew_lease"], {"token": token, "expires_at": expires_at})
                if cur.rowcount == 1:
                    kept.add(token)
            return kept

        return await self._call(op)

    async def claim_due(
        self,
        *,
        owner: str,
        now: float,
        lease_timeout: float,
        limit: int,
        exclude: Collection[str],
        queues: Collection[str] | None = None,
        versions: Collection[str | None] | None = None,
    ) -> list[tuple[WorkflowRecord, Lease]]:
        return await self._call(
            lambda conn: _sqlite_claims.claim_due(
                conn,
                owner=owner,
                now=now,
                lease_timeout=lease_timeout,
                limit=limit,
                exclude=exclude,
                queues=queues,
                versions=versions,
            )
        )

    async def next_due(
        self,
        *,
        owner: str,
        queues: Collection[str] | None = None,
        versions: Collection[str | None] | None = None,
    ) -> float | None:
        return await self._call(
            lambda conn: _sqlite_claims.next_due(
                conn, owner=owner, queues=queues, versions=versions
            )
        )

    async def end_workflow(
        self,
        run_id: str,
        *,
        status: WorkflowStatus,
        error: str | None,
        now: float,
        audit: AuditNote | None = None,
    ) -> bool:
        params = _params.end(run_id, status=status, error=error, now=now)

        def op(conn: sqlite3.Connection) -> bool:
            if conn.execute(_Q["end_by_request"], params).rowcount != 1:
                return False
            conn.execute(_Q["wake_waiters"], {"run_id": run_id, "now": now})
            _audit.write_sqlite(conn, audit, run_id=run_id)
            return True

        return await self._call(op)

    async def request_cancel(
        self, run_id: str, *, reason: str, now: float, audit: AuditNote | None = None
    ) -> bool:
        return await self._call(
            lambda conn: _sqlite_signals.request_cancel(conn, run_id, reason, now, audit)
        )

    async def list_cancel_requests(self, run_id: str) -> list[CancelRequestRecord]:
        return await self._call(lambda conn: _sqlite_signals.list_cancel_requests(conn, run_id))

    async def cancel_requests(self, run_ids: Collection[str]) -> dict[str, str]:
        return await self._call(lambda conn: _sqlite_signals.cancel_requests(conn, run_ids))

    async def retry_now(self, run_id: str, *, now: float, audit: AuditNote | None = None) -> bool:
        def op(conn: sqlite3.Connection) -> bool:
            if conn.execute(_Q["retry_now"], {"run_id": run_id, "now": now}).rowcount != 1:
                return False
            _audit.write_sqlite(conn, audit, run_id=run_id)
            return True

        return await self._call(op)

    async def count_by_status(self) -> dict[WorkflowStatus, int]:
        def op(conn: sqlite3.Connection) -> dict[WorkflowStatus, int]:
            rows = conn.execute(_Q["count_by_status"]).fetchall()
            return _rows.readable_counts(rows)

        return await self._call(op)

    # ------------------------------------------------------------ durable waits

    async def send_signal(
        self,
        key: str,
        *,
        name: str,
        payload: str,
        dedupe_id: str | None,
        now: float,
        run_id: str | None = None,
        audit: AuditNote | None = None,
    ) -> tuple[WorkflowRecord | None, bool]:
        signal = _sqlite_signals.Send(key, name, payload, dedupe_id, now, audit, run_id)
        return await self._call(signal.run)

    async def receive_signal(
        self,
        run_id: str,
        *,
        token: str,
        name: str,
        call_id: str,
        started_at: float,
        deadline: float | None,
        wait: bool,
        accept: Callable[[str], str | None],
        now: float,
    ) -> str | None:
        receive = _params.Receive(
            run_id=run_id,
            token=token,
            name=name,
            call_id=call_id,
            started_at=started_at,
            deadline=deadline,
            wait=wait,
            accept=accept,
            now=now,
        )

        def op(conn: sqlite3.Connection) -> str | None:
            _check_owner(conn, run_id, token)
            pending = conn.execute(_Q["pending_signals"], receive.pending()).fetchall()
            payload, writes = receive.writes(pending)
            for query, params in writes:
                conn.execute(_Q[query], params)
            return payload

        return await self._call(op)

    async def wait_workflow(
        self,
        run_id: str,
        *,
        token: str,
        waiting_for: str,
        next_run_at: float | None,
        step: StepRecord | None,
        now: float,
    ) -> None:
        params = _params.wait(
            run_id, token=token, waiting_for=waiting_for, next_run_at=next_run_at, now=now
        )
        step_params = _params.step(step) if step else None

        def op(conn: sqlite3.Connection) -> None:
            _fenced(conn, "wait_owned", params)
            if step_params is not None:
                conn.execute(_Q["upsert_step"], step_params)

        await self._call(op)

    async def wait_for_child(
        self, run_id: str, *, token: str, child_key: str, wait: bool, now: float
    ) -> WorkflowRecord | None:
        def op(conn: sqlite3.Connection) -> WorkflowRecord | None:
            _check_owner(conn, run_id, token)
            row = conn.execute(_Q["get_current"], {"key": child_key}).fetchone()
            child = _rows.workflow_from_row(row) if row else None
            if child is not None and not child.status.ended and wait:
                waiting_for = _params.child_wait(child_key)
                conn.execute(
                    _Q["wait_owned"],
                    _params.wait(
                        run_id, token=token, waiting_for=waiting_for, next_run_at=None, now=now
                    ),
                )
            return child

        return await self._call(op)

    async def list_signals(self, run_id: str) -> list[SignalRecord]:
        def op(conn: sqlite3.Connection) -> list[SignalRecord]:
            rows = conn.execute(_Q["list_signals"], {"run_id": run_id}).fetchall()
            return [_rows.signal_from_row(row) for row in rows]

        return await self._call(op)

    async def purge_ended(
        self, *, before: float, statuses: Collection[WorkflowStatus] | None, limit: int
    ) -> list[str]:
        return await _purge.sqlite_chunks(self._call, before=before, statuses=statuses, limit=limit)

    async def count_purgeable(
        self, *, before: float, statuses: Collection[WorkflowStatus] | None
    ) -> int:
        names = _purge.ended_statuses(statuses)
        return await self._call(
            lambda conn: _purge.sqlite_count(conn, before=before, statuses=names)
        )

    async def list_page(self, query: ListQuery) -> list[WorkflowRecord]:
        text, params = _listing.page_query(_listing.SQLITE, query)

        def op(conn: sqlite3.Connection) -> list[WorkflowRecord]:
            return _rows.readable_workflows(conn.execute(text, params).fetchall())

        return await self._call(op)

    async def list_attempt_errors(self, run_id: str) -> list[AttemptErrorRecord]:
        def op(conn: sqlite3.Connection) -> list[AttemptErrorRecord]:
            rows = conn.execute(_Q["list_attempt_errors"], {"run_id": run_id}).fetchall()
            return [_inspect.attempt_error_from_row(row) for row in rows]

        return await self._call(op)


def _create(
    conn: sqlite3.Connection,
    new: NewWorkflow,
    params: dict[str, Any],
    *,
    now: float,
    replace_live: bool,
) -> CreateResult:
    """``create_workflow``'s writes (see ``Store.create_workflow``)."""
    inserted = conn.execute(_Q["insert_workflow"], params).fetchone()
    if inserted is not None:
        return CreateResult(_rows.workflow_from_row(inserted), created=True)
    existing = _get_current(conn, new.key)
    if existing.run_id == new.run_id:  # our own earlier attempt
        return CreateResult(existing, created=True)
    if not replace_live or existing.status.ended:
        return CreateResult(existing, created=False)
    conn.execute(
        _Q["supersede"], _params.supersede(existing.run_id, new_run_id=new.run_id, now=now)
    )
    replacing = conn.execute(_Q["insert_workflow"], params).fetchone()
    return CreateResult(
        _rows.workflow_from_row(replacing), created=True, replaced_run_id=existing.run_id
    )


def _get_current(conn: sqlite3.Connection, key: str) -> WorkflowRecord:
    row = conn.execute(_Q["get_current"], {"key": key}).fetchone()
    assert row is not None
    return _rows.workflow_from_row(row)


def _check_owner(conn: sqlite3.Connection, run_id: str, token: str) -> None:
    if conn.execute(_Q["check_owner"], {"run_id": run_id, "token": token}).fetchone() is None:
        raise errors.LeaseLost(run_id)


def _fenced(conn: sqlite3.Connection, query: str, params: dict[str, Any]) -> None:
    """A write fenced by the lease token: ``LeaseLost`` unless it changed the owned row."""
    if conn.execute(_Q[query], params).rowcount != 1:
        raise errors.LeaseLost(params["run_id"])
