"""Engine: the durable operations on workflow executions (start, end, wait, list, ...).

It is the one gateway to the Store: the Manager, the handles, the Worker and the Recovery Worker
all go through it. Each operation is one Store transaction; the Engine adds the rules
(idempotency keys and their conflict policies, who may run what) and publishes state
transitions on the Channel. What it needs of the Worker of its process, if there is one, is
the small ``LocalRunner`` protocol (``local_runner``), attached when the Worker starts. Some
operations live in modules of their own (``forking``, ``signal_sends``, ``notices_heard``,
``purging``, ``end_wait``), which take the Engine through a small protocol.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import uuid
from collections.abc import Collection

from sagaway import errors, events, observe, retry, serialization
from sagaway._engine import (
    audit,
    end_wait,
    flow_control,
    forking,
    new_executions,
    notices_heard,
    outages,
    pausing,
    purging,
    signal_sends,
)
from sagaway._engine.cluster_limits import ClusterLimit
from sagaway._engine.flow import PLAIN, Flow
from sagaway._engine.flow_control import FlowOptions
from sagaway._engine.local_runner import LocalRunner as LocalRunner
from sagaway._engine.local_runner import QueueLimiter
from sagaway._engine.options import EngineOptions
from sagaway._engine.recent import RecentEnds
from sagaway._engine.server_clock import check_lease_timeout
from sagaway._engine.text_checks import check_key
from sagaway._engine.threads import DaemonThreadPool
from sagaway.channel import Channel
from sagaway.clock import Clock
from sagaway.randomness import new_id
from sagaway.registry import Registry, WorkflowDef
from sagaway.states import ErrorKind, OnConflict, WorkflowStatus
from sagaway.store import notices
from sagaway.store.base import Store
from sagaway.store.records import (
    AttemptErrorRecord,
    AuditNote,
    CancelRequestRecord,
    Lease,
    ListQuery,
    SignalRecord,
    StepRecord,
    WorkflowRecord,
)

logger = logging.getLogger(__name__)


class Engine:
    """Durable operations on workflow executions, shared by every component of one Manager."""

    def __init__(
        self, store: Store, options: EngineOptions, *, clock: Clock, registry: Registry
    ) -> None:
        self.store = store
        self.options = options
        self.clock = clock
        """Fixed for the Engine's life (on PostgreSQL, the server's clock: see OffsetClock)."""
        self.registry = registry
        self.marshaler = options.marshaler
        self.payload_limit = options.payload_limit
        check_lease_timeout(store, options.lease_timeout)  # within the Engine Server's limit
        self.lease_timeout = options.lease_timeout
        self.recovery_interval = options.recovery_interval
        self.poll_interval = options.poll_interval
        self.suspend_backoff = retry.RetryPolicy(
            initial_interval=options.recovery_interval,
            backoff_coefficient=2.0,
            maximum_interval=max(options.recovery_interval, 300.0),
            maximum_attempts=0,
        )
        self.channel = Channel()
        self.notifications = False
        """True while the store's notifications reach this process (see ``Store.listen``)."""
        self.end_notices: bool | None = None
        """Whether others' ends are heard, when the store reports it apart (None: it does not)."""
        self._ends: bool | asyncio.Task[None] | None = None
        """Whether the store passes on every end (a task: being asked; None: not listening)."""
        self.recent_ends = RecentEnds()
        """Executions that ended in this process lately, by run id: result() needs no read."""
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
        self.runner: LocalRunner | None = None
        """This process's Worker while it runs (``attach_runner``)."""
        self.paused_calls = pausing.PausedCalls()
        """The activities and queues paused in the cluster, as last read (``pausing``)."""
        self.recovery_wake = asyncio.Event()
        """Set to make this process's Recovery Worker scan now."""
        self.schedule_wake = asyncio.Event()
        """Set when a schedule changed: this process's scheduler looks again now."""
        self._queues = {
            name: QueueLimiter(q, clock) for name, q in options.queues.items() if not q.cluster
        }
        self._cluster_limits = {
            name: ClusterLimit(name, q, store, clock, options.lease_timeout, self.wake_recovery)
            for name, q in options.queues.items()
            if q.cluster
        }
        self._pool: DaemonThreadPool | None = None

    def attach_runner(self, runner: LocalRunner | None) -> None:
        """Run executions started or claimed here on ``runner`` (None: none any more)."""
        self.runner = runner

    def wake_recovery(self) -> None:
        """Make this process's Recovery Worker scan now (something became due, or will be
        before the time it planned to look again)."""
        self.recovery_wake.set()

    # ------------------------------------------------------------------ resources

    @property
    def thread_pool(self) -> DaemonThreadPool:
        """Threads for sync activities; daemons, so process exit does not wait for them."""
        if self._pool is None:
            self._pool = DaemonThreadPool(
                self.options.activity_threads, thread_name_prefix="sagaway-activity"
            )
        return self._pool

    def close_thread_pool(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None

    def queue_slot(
        self, queue: str | None, priority: int = 3
    ) -> contextlib.AbstractAsyncContextManager[None] | None:
        """A slot of ``queue``'s limit in this process to hold while an attempt runs (waiting
        calls served by ``priority``, then first come); None: no such limit."""
        limiter = self._queues.get(queue) if queue else None
        return limiter.slot(priority) if limiter else None

    def cluster_limit(self, queue: str | None) -> ClusterLimit | None:
        """The limits ``queue`` shares with every process, if it is a cluster-wide queue."""
        return self._cluster_limits.get(queue) if queue else None

    def is_completable(self, exc: BaseException) -> bool:
        if isinstance(exc, errors.CompletableError):
            return True
        return self.marshaler.marshal_completable_error(exc) is not None

    def remember_end(self, record: WorkflowRecord) -> None:
        self.recent_ends.add(record)

    def new_lease(self) -> Lease:
        return Lease(new_id(), self.owner, self.clock.now() + self.lease_timeout)

    # ------------------------------------------------------------------ operations

    async def start(
        self,
        defn: WorkflowDef,
        args_json: str,
        *,
        key: str,
        on_conflict: OnConflict,
        parent_key: str | None = None,
        deadline: float | None = None,
        concurrency_key: str | None = None,
        client: bool = False,
        audit_note: AuditNote | None = None,
        flow: Flow = PLAIN,
        keyed: FlowOptions | None = None,
    ) -> tuple[WorkflowRecord, bool]:
        """Create an execution under ``key`` (or find the one there); True if created.
        ``deadline``: seconds from its start until it is cancelled as by a request.
        ``concurrency_key``: created PENDING, never leased here: only a claim applies its limit.
        ``client``: a client's start, which rides through an outage (``outages``).
        ``audit_note``: an operator's start, recorded if it creates the execution.
        ``flow``: its priority and fairness; ``keyed``: its per-key order and debounce. A start
        asking for any of them is created PENDING: claims apply them (``_engine.flow``)."""
        check_key(key, "idempotency_key")
        keyed = flow_control.check_debounce_conflict(keyed, on_conflict)
        replacing = on_conflict is OnConflict.TERMINATE_EXISTING
        new = new_executions.build(
            name=defn.name,
            args_json=args_json,
            key=key,
            queue=defn.task_queue,
            code_version=self.options.code_version,
            parent_key=parent_key,
            replacing=replacing,
            deadline=deadline,
            concurrency_key=concurrency_key,
            max_per_key=defn.max_per_key,
            flow=flow,
            keyed=keyed,
        )
        runner = self.runner
        queued = concurrency_key is not None or keyed.queued or not flow.plain
        here = (
            not queued and runner is not None and runner.accepts(defn.task_queue, new.code_version)
        )
        lease = self.new_lease() if here else None
        result = await outages.create(
            self, new, lease=lease, replace_live=replacing, client=client, audit=audit_note
        )
        record = result.record
        if result.created:
            if result.replaced_run_id is not None:
                self._ended_elsewhere(result.replaced_run_id, key, WorkflowStatus.TERMINATED)
            new_executions.started(self.channel, record.run_id, key, defn.name)
            if lease is not None and runner is not None:
                runner.dispatch(record, lease, steps=[])
            elif queued:
                self.wake_recovery()  # a Worker of this process may claim it at once
            return record, True
        new_executions.taken(record, new, on_conflict)
        return record, False

    async def start_child(
        self,
        defn: WorkflowDef,
        args_json: str,
        *,
        key: str,
        parent_key: str,
        deadline: float | None = None,
        flow: Flow = PLAIN,
    ) -> WorkflowRecord:
        record, _ = await self.start(
            defn,
            args_json,
            key=key,
            on_conflict=OnConflict.ATTACH,
            parent_key=parent_key,
            deadline=deadline,
            flow=flow,
        )
        return record

    async def plan_fork(self, key: str, *, from_step: int, force: bool) -> forking.ForkPlan:
        """What a fork of ``key`` from ``from_step`` would keep (nothing is written)."""
        return await forking.prepare(self.store, key, from_step, force=force)

    async def fork(
        self, key: str, *, from_step: int, new_key: str, force: bool, reason: str | None = None
    ) -> tuple[WorkflowRecord, forking.ForkPlan]:
        """Create a PENDING execution under ``new_key`` that reuses the outcomes of the ended
        workflow ``key`` before its step ``from_step`` (see ``forking``); audited."""
        return await forking.create(
            self, key, from_step=from_step, new_key=new_key, force=force, reason=reason
        )

    async def get(self, key: str) -> WorkflowRecord:
        record = await self.store.get_workflow(key)
        if record is None:
            raise errors.WorkflowNotFound(key)
        return record

    async def wait_for_end(self, run_id: str, key: str, timeout: float | None) -> WorkflowRecord:
        """Until the execution ``run_id`` has ended, through any outage (a workflow's wait:
        ``end_wait``, which a client's ``result()`` calls itself)."""
        return await end_wait.wait_for_end(self, key, run_id=run_id, timeout=timeout, client=False)

    async def end(self, key: str, status: WorkflowStatus, reason: str) -> bool:
        """Cancel or terminate the live execution under ``key`` (an operator's: audited);
        False if it had ended."""
        note = audit.note("terminate" if status is WorkflowStatus.TERMINATED else "cancel", reason)
        record = await self.get(key)
        error = serialization.describe_error(
            errors.WorkflowCancelled(key, status.value, reason), ErrorKind.CANCELLED
        )
        changed = await self.store.end_workflow(
            record.run_id, status=status, error=error, now=self.clock.now(), audit=note
        )
        if changed:
            self._ended_elsewhere(record.run_id, key, status)
            if observe.observers:
                observe.workflow_ended(record.name, key, status.value)
        return changed

    async def request_cancel(
        self, key: str, reason: str, *, audit_note: AuditNote | None = None
    ) -> bool:
        """Ask the live execution under ``key`` to cancel (cooperatively: it sees
        ``Cancelled`` at its next durable call or wait, compensates, and ends CANCELLED);
        False if it had ended. ``audit_note``: an operator's (made once, so a call tried
        again through an outage writes one entry)."""
        record = await self.get(key)
        changed = await self.store.request_cancel(
            record.run_id, reason=reason, now=self.clock.now(), audit=audit_note
        )
        if changed:
            if self.runner is not None:
                self.runner.cancel_requested(record.run_id, reason)
            self.wake_recovery()  # a waiting or suspended run became due
        return changed

    async def cancel_requests(self, run_ids: Collection[str]) -> dict[str, str]:
        return await self.store.cancel_requests(run_ids)

    def runs_here(self, run_id: str) -> bool:
        return self.runner is not None and self.runner.is_running(run_id)

    def _ended_elsewhere(self, run_id: str, key: str, status: WorkflowStatus) -> None:
        if self.runner is not None:
            self.runner.cancel(run_id)
        self.channel.publish(events.WorkflowEnded(run_id, key, status))

    def on_notification(self, notice: notices.Notice) -> None:
        """A change made by another process (or this one), announced by the store."""
        notices_heard.on_notification(self, notice)

    send_signal = signal_sends.send_signal
    """Store a signal for the workflow under ``key`` (see ``signal_sends``)."""

    async def retry_now(self, key: str, reason: str | None = None) -> bool:
        """Make a SUSPENDED workflow due now; False if it is not suspended (audited)."""
        note = audit.note("retry", reason)
        record = await self.get(key)
        changed = await self.store.retry_now(record.run_id, now=self.clock.now(), audit=note)
        if changed:
            self.wake_recovery()
        return changed

    # ------------------------------------------------------------------ reads

    async def get_run(self, run_id: str) -> WorkflowRecord | None:
        return await self.store.get_run(run_id)

    async def load_steps(self, run_id: str) -> list[StepRecord]:
        return await self.store.load_steps(run_id)

    async def list_workflows(
        self, *, status: WorkflowStatus | None, limit: int
    ) -> list[WorkflowRecord]:
        return await self.store.list_workflows(status=status, limit=limit)

    async def list_signals(self, key: str) -> list[SignalRecord]:
        """Signals sent to the current execution under ``key``, delivered or not, in order."""
        record = await self.get(key)
        return await self.store.list_signals(record.run_id)

    async def count_by_status(self) -> dict[WorkflowStatus, int]:
        return await self.store.count_by_status()

    purge = purging.purge
    """Delete executions that ended ``older_than`` seconds ago or more (see ``purging``)."""

    async def list_page(self, query: ListQuery) -> list[WorkflowRecord]:
        return await self.store.list_page(query)

    async def list_attempt_errors(self, run_id: str) -> list[AttemptErrorRecord]:
        return await self.store.list_attempt_errors(run_id)

    async def list_cancel_requests(self, run_id: str) -> list[CancelRequestRecord]:
        """Cancel requests made to the execution ``run_id``, accepted or not, in order."""
        return await self.store.list_cancel_requests(run_id)

    async def list_run_signals(self, run_id: str) -> list[SignalRecord]:
        """Signals sent to the execution ``run_id``, delivered or not, in order."""
        return await self.store.list_signals(run_id)

    # ------------------------------------------------------------------ ownership

    async def claim_due(
        self,
        *,
        limit: int,
        exclude: Collection[str],
        queues: Collection[str] | None,
        versions: Collection[str | None] | None = None,
    ) -> list[tuple[WorkflowRecord, Lease]]:
        """Take leases on up to ``limit`` executions due now (not those in ``exclude``) of
        ``queues`` and code ``versions`` (None: any)."""
        return await self.store.claim_due(
            owner=self.owner,
            now=self.clock.now(),
            lease_timeout=self.lease_timeout,
            limit=limit,
            exclude=exclude,
            queues=queues,
            versions=versions,
        )

    async def load_steps_many(self, run_ids: Collection[str]) -> dict[str, list[StepRecord]]:
        return await self.store.load_steps_many(run_ids)

    async def next_due(
        self, queues: Collection[str] | None, versions: Collection[str | None] | None = None
    ) -> float | None:
        """When the next execution (of ``queues`` and ``versions``) another process does not
        own falls due (None: none)."""
        return await self.store.next_due(owner=self.owner, queues=queues, versions=versions)

    async def renew_leases(self, tokens: Collection[str]) -> tuple[set[str], float]:
        """Extend the leases of ``tokens``: the tokens still owned, and until when they are."""
        expires_at = self.clock.now() + self.lease_timeout
        return await self.store.renew_leases(tokens, expires_at=expires_at), expires_at

    async def release(self, run_id: str, token: str) -> None:
        """Give an owned execution up, due now (another process may take it at once)."""
        await self.store.release_workflow(run_id, token=token, now=self.clock.now())

    async def suspend(self, record: WorkflowRecord, token: str, error: errors.SagawayError) -> None:
        """SUSPEND an owned execution that cannot run here, ``error`` recorded, retried later."""
        now = self.clock.now()
        await self.store.suspend_workflow(
            record.run_id,
            token=token,
            error=serialization.describe_error(error, ErrorKind.INCOMPLETABLE),
            now=now,
            next_run_at=now + self.suspend_backoff.interval(record.suspend_count + 1),
        )

    # ------------------------------------------------------------------ lifecycle

    async def listen(self, *, runs_workflows: bool) -> None:
        """Have the store's notifications (if any) reach this Engine: a process that runs
        workflows hears new work and what it owns now, every end from its first wait for one
        (``want_ends``); one that runs none, nothing before its first wait for an end."""
        self._ends = False
        if runs_workflows:
            await self.store.listen(self.on_notification, owner=self.owner, ends=False)

    def want_ends(self) -> None:
        """This process waits for an end elsewhere: have the store pass on everyone's. Not
        awaited: until the store says they are heard (``Listening("ends")``, which wakes
        every waiter to look again), an end is seen by the waiter's next read."""
        if self._ends is False:
            self._ends = asyncio.create_task(
                self.store.listen(self.on_notification, owner=self.owner, ends=True),
                name="sagaway-listen-ends",
            )
            self._ends.add_done_callback(self._listen_failed)

    def _listen_failed(self, task: asyncio.Task[None]) -> None:
        """A listen that raised: said once, and tried again at the next wait (polls meanwhile)."""
        if not task.cancelled() and task.exception() is not None and self._ends is task:
            logger.warning("cannot listen for notices (%s); waits poll", task.exception())
            self._ends = False

    async def close(self) -> None:
        ends, self._ends = self._ends, None
        if isinstance(ends, asyncio.Task) and ends.cancel():
            with contextlib.suppress(asyncio.CancelledError):
                await ends
        self.runner = None
        self.close_thread_pool()
        await self.store.close()


class EngineRef:
    """Where handles, calls and signals find their Manager's Engine: there while it is open."""

    __slots__ = ("engine",)

    def __init__(self) -> None:
        self.engine: Engine | None = None

    def require(self) -> Engine:
        if self.engine is None:
            raise errors.ManagerStateError(
                "the Manager is not open: use `async with manager:` (runs workers) or "
                "`async with manager.connect():` (client only)"
            )
        return self.engine
