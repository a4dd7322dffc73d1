"""Engine: the server operations on workflows (create, complete, list, get, ...) over a Store.

Each operation is one Store transaction; the Engine adds the rules (idempotency keys and their
conflict policies, who may run what) and publishes state transitions on the Channel. The Worker,
the Recovery Worker, the Manager and the gRPC server all go through it.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import os
import socket
import uuid
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from sagaway import errors, events, retry, serialization
from sagaway._engine import keys
from sagaway._engine.recent import RecentEnds
from sagaway._engine.states import WorkflowStatus
from sagaway._engine.threads import DaemonThreadPool
from sagaway.channel import Channel
from sagaway.clock import Clock, wait_event_or_sleep
from sagaway.registry import Queue, Registry, WorkflowDef
from sagaway.store.base import Store, StoreUnavailable
from sagaway.store.records import Lease, NewWorkflow, WorkflowRecord

if TYPE_CHECKING:
    from sagaway.worker import Worker


logger = logging.getLogger(__name__)


def check_text(value: str, what: str) -> None:
    """Refuse a key or name that a database cannot store as text (``ValueError``)."""
    if "\x00" in value:
        raise ValueError(f"{what} must not contain NUL characters (\\x00): {value!r}")
    if not value.isascii():
        try:
            value.encode()
        except UnicodeEncodeError:
            raise ValueError(
                f"{what} must be valid Unicode (no lone surrogates such as '\\ud800'): {value!r}"
            ) from None


class OnConflict(enum.Enum):
    """What a start does when its idempotency key is already in use."""

    ATTACH = "attach"
    """Return the existing execution (a client retry joins it). Default."""
    FAIL = "fail"
    """Raise ``WorkflowAlreadyExists``."""
    TERMINATE_EXISTING = "terminate_existing"
    """Terminate the live execution and start anew under the key."""


class _QueueLimiter:
    """Per-process concurrency and rate limit of one activity queue."""

    def __init__(self, queue: Queue, clock: Clock) -> None:
        self._sem = asyncio.Semaphore(queue.concurrency) if queue.concurrency else None
        self._interval = 1.0 / queue.rate_per_second if queue.rate_per_second else 0.0
        self._next_start = 0.0
        self._clock = clock

    @contextlib.asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        if self._interval:
            now = self._clock.now()
            start = max(now, self._next_start)
            self._next_start = start + self._interval
            if start > now:
                await self._clock.sleep(start - now)
        if self._sem is None:
            yield
            return
        async with self._sem:
            yield


class Engine:
    """Durable operations on workflow executions, shared by every component of one Manager."""

    def __init__(
        self,
        store: Store,
        *,
        clock: Clock,
        registry: Registry,
        marshaler: serialization.ErrorMarshaler,
        payload_limit: int,
        lease_timeout: float,
        recovery_interval: float,
        poll_interval: float,
        queues: dict[str, Queue],
        activity_threads: int,
    ) -> None:
        self.store = store
        self.clock = clock
        self.registry = registry
        self.marshaler = marshaler
        self.payload_limit = payload_limit
        self.lease_timeout = lease_timeout
        self.recovery_interval = recovery_interval
        self.poll_interval = poll_interval
        self.suspend_backoff = retry.RetryPolicy(
            initial_interval=recovery_interval,
            backoff_coefficient=2.0,
            maximum_interval=max(recovery_interval, 300.0),
            maximum_attempts=0,
        )
        self.channel = Channel()
        self.notifications = False
        """True while the store's notifications reach this process (see ``Store.listen``)."""
        self.recent_ends = RecentEnds()
        """Executions that ended in this process lately, by run id: result() needs no read."""
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
        self.worker: Worker | None = None
        self._queues = {name: _QueueLimiter(q, clock) for name, q in queues.items()}
        self._threads = activity_threads
        self._pool: DaemonThreadPool | None = None
        self._default_marshaler = serialization.DefaultErrorMarshaler()

    # ------------------------------------------------------------------ resources

    @property
    def thread_pool(self) -> DaemonThreadPool:
        """Threads for sync activities; daemons, so process exit does not wait for them."""
        if self._pool is None:
            self._pool = DaemonThreadPool(self._threads, thread_name_prefix="sagaway-activity")
        return self._pool

    def close_thread_pool(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None

    def queue_slot(self, queue: str | None) -> contextlib.AbstractAsyncContextManager[None]:
        limiter = self._queues.get(queue) if queue else None
        return limiter.slot() if limiter else contextlib.nullcontext()

    def has_queue(self, name: str) -> bool:
        return name in self._queues

    def is_completable(self, exc: BaseException) -> bool:
        if isinstance(exc, errors.CompletableError):
            return True
        return self.marshaler.marshal_completable_error(exc) is not None

    def remember_end(self, record: WorkflowRecord) -> None:
        self.recent_ends.add(record)

    def new_lease(self) -> Lease:
        return Lease(uuid.uuid4().hex, self.owner, self.clock.now() + self.lease_timeout)

    # ------------------------------------------------------------------ operations

    async def start(
        self,
        defn: WorkflowDef,
        args_json: str,
        *,
        key: str,
        on_conflict: OnConflict,
        parent_key: str | None = None,
    ) -> tuple[WorkflowRecord, bool]:
        """Create an execution under ``key`` (or find the one there); True if created."""
        if not isinstance(key, str) or not key:
            raise ValueError("idempotency_key must be a non-empty string")
        if len(key) > 512:
            raise ValueError("idempotency_key must be at most 512 characters")
        check_text(key, "idempotency_key")
        run_id = uuid.uuid4().hex
        new = NewWorkflow(
            run_id=run_id,
            key=key,
            name=defn.name,
            args=args_json,
            args_hash=serialization.args_hash(args_json),
            parent_key=parent_key,
            queue=defn.queue,
            key_space=keys.key_space(
                key, run_id, replacing=on_conflict is OnConflict.TERMINATE_EXISTING
            ),
        )
        worker = self.worker
        runs_here = worker is not None and worker.accepting and worker.serves(defn.queue)
        lease = self.new_lease() if runs_here else None
        result = await self.store.create_workflow(
            new,
            now=self.clock.now(),
            lease=lease,
            replace_live=on_conflict is OnConflict.TERMINATE_EXISTING,
        )
        record = result.record
        if result.created:
            if result.replaced_run_id is not None:
                self._ended_elsewhere(result.replaced_run_id, key, WorkflowStatus.TERMINATED)
            self.channel.publish(events.WorkflowStarted(record.run_id, key, defn.name))
            if lease is not None and worker is not None:
                worker.dispatch(record, lease, steps=[])
            return record, True
        if on_conflict is OnConflict.FAIL:
            raise errors.WorkflowAlreadyExists(key, record.status.value)
        if on_conflict is OnConflict.TERMINATE_EXISTING:
            raise errors.WorkflowAlreadyExists(
                key,
                record.status.value,
                f"workflow {key!r} already ended ({record.status.value}); a key names one "
                "execution and a finished one is never run again: use a new key",
            )
        if record.name != defn.name or record.args_hash != new.args_hash:
            raise errors.IdempotencyConflict(
                f"idempotency key {key!r} is in use by workflow {record.name!r} with other "
                "arguments; a retry must send the same arguments, a new request needs a new key"
            )
        return record, False

    async def start_child(
        self, defn: WorkflowDef, args_json: str, *, key: str, parent_key: str
    ) -> WorkflowRecord:
        record, _ = await self.start(
            defn, args_json, key=key, on_conflict=OnConflict.ATTACH, parent_key=parent_key
        )
        return record

    async def get(self, key: str) -> WorkflowRecord:
        record = await self.store.get_workflow(key)
        if record is None:
            raise errors.WorkflowNotFound(key)
        return record

    async def wait_for_end(self, run_id: str, key: str, timeout: float | None) -> WorkflowRecord:
        """Wait until the execution is COMPLETED, FAILED, CANCELLED or TERMINATED.

        In-process ends wake the waiter through the Channel. Ends in other processes wake it
        through the store's notifications when it has them (PostgreSQL), with a read every
        ``poll_interval`` as a safety net; without them (SQLite, or while the notification
        connection is down) they are seen by polling, from 20 ms up to ``poll_interval``.
        While the database is unavailable it keeps waiting (an outage is no answer), until
        ``timeout``.
        """
        deadline = None if timeout is None else self.clock.now() + timeout
        waiter = self.channel.watch(run_id)
        delay = 0.02
        local = self.worker is not None and self.worker.is_running(run_id)
        try:
            while True:
                waiter.clear()
                ended = waiter.record or self.recent_ends.get(run_id)
                if ended is not None:
                    return ended  # ended in this process: no need to read it back
                if local and self.worker is not None and self.worker.is_running(run_id):
                    # Running here: its end will be published on the Channel.
                    await wait_event_or_sleep(waiter, self.clock, self.poll_interval)
                    continue
                try:
                    record = await self.store.get_run(run_id)
                except StoreUnavailable as exc:
                    logger.warning(
                        "cannot read workflow %s (%s); still waiting for its end",
                        key,
                        exc,
                        extra={"action": "wait_unavailable", "workflow_id": key},
                    )
                    status = "unknown: the database is unavailable"
                    # The read itself waited for a connection; the listener's return (or the
                    # next poll) wakes us to look again.
                    wait, delay = delay, min(delay * 2, self.poll_interval)
                else:
                    if record is None:
                        raise errors.WorkflowNotFound(key)
                    if record.status.ended:
                        return record
                    status = record.status.value
                    if self.notifications:
                        # The end's notice will wake us; the read is only a safety net.
                        wait, delay = self.poll_interval, 0.02
                    else:
                        wait, delay = delay, min(delay * 2, self.poll_interval)
                if deadline is not None:
                    left = deadline - self.clock.now()
                    if left <= 0:
                        raise TimeoutError(
                            f"workflow {key!r} did not end within {timeout}s (status {status})"
                        )
                    wait = min(wait, left)
                await wait_event_or_sleep(waiter, self.clock, wait)
        finally:
            self.channel.unwatch(run_id, waiter)

    async def end(self, key: str, status: WorkflowStatus, reason: str) -> bool:
        """Cancel or terminate the live execution under ``key``; False if it had ended."""
        record = await self.get(key)
        error = serialization.describe_error(
            errors.WorkflowCancelled(key, status.value, reason), "cancelled"
        )
        changed = await self.store.end_workflow(
            record.run_id, status=status, error=error, now=self.clock.now()
        )
        if changed:
            self._ended_elsewhere(record.run_id, key, status)
        return changed

    def _ended_elsewhere(self, run_id: str, key: str, status: WorkflowStatus) -> None:
        if self.worker is not None:
            self.worker.cancel_local(run_id)
        self.channel.publish(events.WorkflowEnded(run_id, key, status))

    def on_notification(self, payload: str) -> None:
        """A change made by another process (or this one), announced by the store."""
        kind, _, detail = payload.partition(":")
        if kind == "ended":
            self.channel.publish(events.WorkflowChanged(detail))
            if self.worker is not None:
                self.worker.ended_elsewhere(detail)  # cancelled elsewhere while running here
        elif kind == "ready" and self.worker is not None:
            self.worker.wake_recovery()
        elif kind in ("listening", "deaf"):
            # Notices may have been missed (or will be): everyone waiting looks again now.
            self.notifications = kind == "listening"
            self.channel.wake_all()
            if self.worker is not None:
                self.worker.wake_recovery()

    async def send_signal(self, key: str, name: str, payload: Any, dedupe_id: str | None) -> bool:
        """Store a signal for the workflow under ``key``; False if ``dedupe_id`` was seen."""
        # Checked here, before the database: PostgreSQL refuses NUL in text with a raw
        # DataError (SQLite stores it), and neither can store a lone surrogate.
        check_text(name, "signal name")
        if dedupe_id is not None:
            check_text(dedupe_id, "dedupe_id")
        data = serialization.encode_value(
            payload, f"payload of signal {name!r}", self.payload_limit
        )
        record, stored = await self.store.send_signal(
            key, name=name, payload=data, dedupe_id=dedupe_id, now=self.clock.now()
        )
        if record is None:
            raise errors.WorkflowNotFound(key)
        if record.status.ended:
            raise errors.SagawayError(
                f"workflow {key!r} has ended ({record.status.value}); signal {name!r} was not "
                "delivered"
            )
        if stored:
            self.channel.publish(events.SignalSent(record.run_id, key, name))
            if self.worker is not None:
                self.worker.wake_recovery()
        return stored

    async def retry_now(self, key: str) -> bool:
        """Make a SUSPENDED workflow due now; False if it is not suspended."""
        record = await self.get(key)
        changed = await self.store.retry_now(record.run_id, now=self.clock.now())
        if changed and self.worker is not None:
            self.worker.wake_recovery()
        return changed
