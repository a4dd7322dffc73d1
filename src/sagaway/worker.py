"""Worker: runs workflow executions this process owns, under a concurrency limit.

``concurrency`` bounds the executions that *work* at once, not those that exist: an execution
holds one of the slots while its code or an activity of it runs, and gives it back while it
only waits in the worker (for a child's end, a signal, a short timer; see ``Execution``), taking
one again before its next activity. Otherwise parents waiting on their children could hold every
slot while the children wait for one, and nothing would ever end. ``free_slots`` counts the
slots neither held nor asked for, so the Recovery Worker keeps claiming work (children, say)
while the executions it claimed earlier wait.

Every execution it runs is owned through a lease; one heartbeat task renews all of them in one
transaction. An execution whose lease could not be renewed (another process took it over after
a pause, or it was cancelled) is stopped at once. On shutdown, executions still running are
cancelled and their leases released so another process can take them without waiting.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import Callable

from sagaway import errors, events, observe
from sagaway._engine import context, pausing, versions
from sagaway._engine.engine import Engine
from sagaway._engine.executor import Execution
from sagaway._tasks import cancel_and_wait
from sagaway.store.records import Lease, StepRecord, WorkflowRecord

logger = logging.getLogger(__name__)

ENDING_GRACE = 5.0
"""Seconds a shutdown waits for executions already writing their end (see ``Worker.stop``)."""


class _Slot:
    """One execution's claim on a Worker slot (the ``executor.WorkerSlot`` it is given)."""

    __slots__ = ("_lock", "_worker", "held", "wanted")

    def __init__(self, worker: Worker) -> None:
        self._worker = worker
        self._lock = asyncio.Lock()  # two branches asking at once take one slot
        self.held = False
        self.wanted = False
        """Counted in the worker's demand: held, or asked for."""

    def want(self) -> None:
        if not self.wanted:
            self.wanted = True
            self._worker._demand += 1

    async def acquire(self) -> None:
        if self.held:
            return
        async with self._lock:
            if self.held:
                return
            self.want()
            try:
                await self._worker._slots.acquire()
            except BaseException:
                self._unwant()
                raise
            self.held = True

    def release(self) -> None:
        if self.held:
            self.held = False
            self._worker._slots.release()
        self._unwant()

    def _unwant(self) -> None:
        if self.wanted:
            self.wanted = False
            self._worker._demand -= 1
            if self._worker._demand == self._worker.concurrency - 1:
                self._worker.capacity_freed.set()  # was full: the Recovery Worker may claim


@dataclasses.dataclass(frozen=True, slots=True)
class ExecutionState:
    """What one execution of a Worker is doing, as far as slots are concerned."""

    run_id: str
    key: str
    holds_slot: bool
    activities: int
    """Activity attempts running now."""
    waiting: int
    """Branches waiting in this process (a child's end, a signal, a short timer)."""
    cancel_requested: bool = False
    """A cancel request has reached it (it may not have been delivered yet)."""

    @property
    def only_waits(self) -> bool:
        """It waits and runs nothing: it must not hold a slot."""
        return self.waiting > 0 and self.activities == 0


_ANNOUNCED = frozenset({"completed", "failed", "cancelled", "terminated", "waiting", "suspended"})
"""Outcomes of an execution that published themselves on the Channel as it ended."""


@dataclasses.dataclass(slots=True, eq=False)
class _Running:
    record: WorkflowRecord
    lease: Lease
    slot: _Slot
    task: asyncio.Task[None] | None = None
    execution: Execution | None = None
    cancelled: bool = False
    """Stopped on purpose (ended by request, lease lost): do not release the lease."""
    cancel_reason: str | None = None
    """A cancel request that came before the execution was built."""
    valid_until: float = 0.0
    """Until when the lease is known to be held (its claim, then each renewal heard)."""
    started: bool = False
    """Its task began (a task cancelled before it began never released the lease)."""
    done: Callable[[object], None] = lambda _: None
    """Its task's done callback (the bookkeeping of ``Worker._done``)."""


class Worker:
    """Executes owned workflows as asyncio tasks."""

    def __init__(
        self,
        engine: Engine,
        concurrency: int,
        task_queues: frozenset[str] | None = None,
        run_versions: frozenset[str | None] | None = None,
    ) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be >= 1")
        self.engine = engine
        self.concurrency = concurrency
        self.task_queues = task_queues
        """Task queues whose workflows this worker runs (None: all)."""
        self.run_versions = run_versions
        """Code versions whose executions this worker runs (None: all; None in the set: the
        unversioned ones)."""
        self.accepting = False
        self._slots = asyncio.Semaphore(concurrency)
        self._demand = 0
        """Executions holding a slot or waiting for one (see _Slot)."""
        self._running: dict[str, _Running] = {}
        self._heartbeat: asyncio.Task[None] | None = None
        self._requests: set[asyncio.Task[None]] = set()
        """Reads of cancel requests announced without their reason."""
        self._idle = asyncio.Event()
        self._idle.set()
        self.capacity_freed = asyncio.Event()
        self.execution_left = asyncio.Event()
        """Set whenever an execution leaves this worker (ended, unloaded, released)."""

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        # Workflow code's tasks are numbered when created (deterministic call ids on replay).
        context.install_task_factory(asyncio.get_running_loop())
        self.accepting = True
        self.engine.attach_runner(self)
        self._heartbeat = asyncio.create_task(self._heartbeat_loop(), name="sagaway-heartbeat")

    async def stop(self, drain_timeout: float = 0.0, force: asyncio.Event | None = None) -> None:
        """Stop taking work; let running executions finish for ``drain_timeout`` s (or until
        ``force`` is set), then cancel them and release their leases. One already writing its
        end gets up to ``ENDING_GRACE`` s more to finish that write."""
        self.accepting = False
        if self._running and drain_timeout > 0:
            waits = [asyncio.ensure_future(self._idle.wait())]
            if force is not None:
                waits.append(asyncio.ensure_future(force.wait()))
            try:
                await asyncio.wait(
                    waits, timeout=drain_timeout, return_when=asyncio.FIRST_COMPLETED
                )
            finally:
                for waiter in waits:
                    waiter.cancel()
        await self._let_ends_commit()
        entries = list(self._running.values())
        tasks = [entry.task for entry in entries if entry.task is not None]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        # Dispatched just now, cancelled before they began: give them back to run elsewhere.
        unstarted = [e for e in entries if not e.started and not e.cancelled]
        if unstarted:
            await asyncio.gather(*(self._release(entry) for entry in unstarted))
        for request in list(self._requests):
            request.cancel()
        await cancel_and_wait(self._heartbeat)
        self._heartbeat = None

    async def _let_ends_commit(self) -> None:
        """Give executions already writing their end a moment to finish that write.

        Cancelling one then saves nothing: the end may already be committed (a caller may
        even have its result), and the run would be reported as stopped although it ended.
        """
        ending = [
            entry.task
            for entry in self._running.values()
            if entry.task is not None and entry.execution is not None and entry.execution.finishing
        ]
        if ending:
            await asyncio.wait(ending, timeout=ENDING_GRACE)

    # ------------------------------------------------------------------ work

    def is_running(self, run_id: str) -> bool:
        return run_id in self._running

    def serves(self, task_queue: str, code_version: str | None = None) -> bool:
        """Whether this worker runs workflows of ``task_queue`` and ``code_version``."""
        in_queue = self.task_queues is None or task_queue in self.task_queues
        return in_queue and versions.runs(self.run_versions, code_version)

    def accepts(self, task_queue: str, code_version: str | None = None) -> bool:
        """Whether a workflow of ``task_queue`` and ``code_version`` started in this process
        may run here at once."""
        return self.accepting and self.serves(task_queue, code_version)

    @property
    def running_ids(self) -> set[str]:
        return set(self._running)

    @property
    def free_slots(self) -> int:
        """Slots neither held nor asked for: how much more work this worker can take now.

        Executions that only wait are not counted (they gave their slot back).
        """
        return max(self.concurrency - self._demand, 0)

    @property
    def slots_held(self) -> int:
        return sum(1 for entry in self._running.values() if entry.slot.held)

    def executions(self) -> list[ExecutionState]:
        """A snapshot of every execution this worker owns (for monitoring and tests)."""
        states = []
        for entry in self._running.values():
            execution = entry.execution
            states.append(
                ExecutionState(
                    run_id=entry.record.run_id,
                    key=entry.record.key,
                    holds_slot=entry.slot.held,
                    activities=0 if execution is None else execution.activities,
                    waiting=0 if execution is None else execution.waiting,
                    cancel_requested=entry.cancel_reason is not None
                    or (execution is not None and execution.cancels.reason is not None),
                )
            )
        return states

    def dispatch(
        self, record: WorkflowRecord, lease: Lease, steps: list[StepRecord] | None
    ) -> None:
        """Run an execution this process has just claimed."""
        if record.run_id in self._running:
            logger.error("run %s dispatched twice; ignoring the second", record.run_id)
            return
        entry = _Running(record, lease, _Slot(self), valid_until=lease.expires_at)
        entry.done = lambda _: self._done(entry)
        entry.slot.want()  # counted at once: the Recovery Worker must not claim past it
        self._running[record.run_id] = entry
        self._idle.clear()
        entry.task = asyncio.create_task(self._run(entry, steps), name=f"sagaway-wf:{record.key}")
        # Also a callback, not only a finally: a task cancelled before it started runs no code.
        entry.task.add_done_callback(entry.done)

    def ended_elsewhere(self, run_id: str) -> None:
        """Another process reports ``run_id`` ended: stop it here unless it is ending itself."""
        entry = self._running.get(run_id)
        if entry is not None and not (entry.execution is not None and entry.execution.finishing):
            self.cancel(run_id)

    def cancel_requested(self, run_id: str, reason: str | None) -> None:
        """Tell the execution of ``run_id``, if it runs here, that it is to be cancelled
        (``reason`` None: a notice without it, so it is read from the database first)."""
        entry = self._running.get(run_id)
        if entry is None:
            return
        if reason is None:
            task = asyncio.create_task(self._read_cancel_requests([run_id]))
            self._requests.add(task)
            task.add_done_callback(self._requests.discard)
            return
        entry.cancel_reason = entry.cancel_reason or reason
        if entry.execution is not None:
            entry.execution.cancels.deliver(reason)

    def paused(self, run_id: str) -> None:
        """``run_id`` was paused: it stops here before its next durable call (``pausing``)."""
        entry = self._running.get(run_id)
        if entry is not None and entry.execution is not None:
            entry.execution.cancels.deliver_pause()

    async def _read_cancel_requests(self, run_ids: list[str]) -> None:
        try:
            reasons = await self.engine.cancel_requests(run_ids)
        except Exception:
            # The heartbeat reads them again.
            logger.warning("could not read cancel requests", exc_info=True)
            return
        for run_id, reason in reasons.items():
            self.cancel_requested(run_id, reason)

    def cancel(self, run_id: str) -> None:
        """Stop an execution that was ended elsewhere (cancel, terminate)."""
        entry = self._running.get(run_id)
        if entry is None:
            return
        entry.cancelled = True
        if entry.execution is not None:
            entry.execution.cancel_requested = True
        if entry.task is not None:
            entry.task.cancel()

    async def _run(self, entry: _Running, steps: list[StepRecord] | None) -> None:
        engine = self.engine
        record = entry.record
        entry.started = True
        try:
            await entry.slot.acquire()
            try:
                defn = engine.registry.workflow(record.name)
            except errors.NotRegistered as exc:
                await self._suspend_unknown(entry, exc)
                return
            if steps is None:
                try:
                    steps = await engine.load_steps(record.run_id)
                except errors.CorruptRecord as exc:
                    await self._suspend_corrupt(entry, exc)
                    return
            execution = Execution(engine, defn, record, entry.lease, steps, slot=entry.slot)
            execution.cancel_requested = entry.cancelled
            execution.lease_renewed(entry.valid_until)
            if entry.cancel_reason is not None:
                execution.cancels.deliver(entry.cancel_reason)
            entry.execution = execution
            await execution.run()
        except asyncio.CancelledError:
            if not entry.cancelled:
                if entry.execution is not None:
                    # Keep what finished (shutdown): the next owner does not run it again.
                    with contextlib.suppress(Exception, errors.Cancelled):
                        await entry.execution.flush()
                await self._release(entry)
        except errors.LeaseLost:
            pass
        except Exception:
            # The store failed (database gone, disk full): the lease will expire and the
            # Recovery Worker of some process resumes the workflow from its last commit.
            logger.exception(
                "workflow %s stopped by an engine error; recovery will resume it",
                record.key,
                extra={"action": "engine_error", "workflow_id": record.key},
            )
        finally:
            # The bookkeeping now rather than in the done callback, which would be left on the
            # event loop's ready queue: a caller that this end just woke (the next start of a
            # sequential client) then finds the loop idle, and SQLite writes it on this thread.
            if entry.task is not None:
                entry.task.remove_done_callback(entry.done)
            self._done(entry)

    def _done(self, entry: _Running) -> None:
        entry.slot.release()
        if self._running.get(entry.record.run_id) is entry:
            del self._running[entry.record.run_id]
            if entry.execution is None or entry.execution.outcome not in _ANNOUNCED:
                # Left without publishing its end or wait (an end whose commit went
                # unacknowledged, a lost lease): whoever waits for it here reads it again now.
                self.engine.channel.publish(events.WorkflowChanged(entry.record.run_id))
        self.execution_left.set()
        if not self._running:
            self._idle.set()

    async def _suspend_unknown(self, entry: _Running, exc: errors.NotRegistered) -> None:
        record = entry.record
        error = errors.NotRegistered(
            f"workflow {record.name!r} of {record.key!r} is recorded in the database but not "
            f"registered in this process ({exc}); deploy code that registers it, then "
            "`sagaway retry KEY`"
        )
        await self._suspend_unrunnable(entry, error, "not_registered")

    async def _suspend_corrupt(self, entry: _Running, exc: errors.CorruptRecord) -> None:
        # Without this the error would end the task as an engine error: the lease expires, the
        # workflow is claimed again and fails again, RUNNING forever with no error shown.
        error = errors.CorruptRecord(
            f"workflow {entry.record.key!r}: {exc.what}",
            exc.field,
            exc.value,
            "repair or delete the step row, then `sagaway retry KEY`",
        )
        await self._suspend_unrunnable(entry, error, "corrupt_record")

    async def _suspend_unrunnable(
        self, entry: _Running, error: errors.SagawayError, action: str
    ) -> None:
        """SUSPEND a claimed workflow that cannot run here, with ``error`` recorded."""
        await self.engine.suspend(entry.record, entry.lease.token, error)
        logger.error(str(error), extra={"action": action, "workflow_id": entry.record.key})

    async def _release(self, entry: _Running) -> None:
        with contextlib.suppress(Exception):
            await self.engine.release(entry.record.run_id, entry.lease.token)

    async def _heartbeat_loop(self) -> None:
        engine = self.engine
        interval = engine.lease_timeout / 3
        await pausing.heartbeat(engine, ())  # paused activities and queues, before any attempt
        while self.accepting or self._running:
            await engine.clock.sleep(interval)
            if not self._running:
                await pausing.heartbeat(engine, ())
                continue
            entries = list(self._running.values())
            try:
                kept, renewed_to = await engine.renew_leases([e.lease.token for e in entries])
            except Exception:
                logger.exception("lease heartbeat failed; retrying", extra={"action": "heartbeat"})
                continue
            for entry in entries:
                execution = entry.execution
                if entry.lease.token in kept:
                    entry.valid_until = max(entry.valid_until, renewed_to)
                    if execution is not None:
                        execution.lease_renewed(renewed_to)
                if execution is not None and execution.giving_up_lease:
                    continue  # its end or its wait was written (or is): the lease is not lost
                if entry.lease.token not in kept and entry.record.run_id in self._running:
                    if execution is not None:
                        execution.outcome = "lease_lost"
                    if observe.observers:
                        observe.lease_lost(entry.record.name, entry.record.key)
                    logger.warning(
                        "lease of workflow %s lost; stopping it here",
                        entry.record.key,
                        extra={"action": "lease_lost", "workflow_id": entry.record.key},
                    )
                    self.cancel(entry.record.run_id)
            # Cancel requests this process was not told of (SQLite has no notices; a notice
            # can be missed while the listener reconnects).
            unaware = [
                e.record.run_id
                for e in entries
                if e.cancel_reason is None and e.record.run_id in self._running
            ]
            if unaware:
                await self._read_cancel_requests(unaware)
            live = [e.record.run_id for e in entries if e.record.run_id in self._running]
            for run_id in await pausing.heartbeat(engine, live):
                self.paused(run_id)
