"""The state every durable call of one execution shares, and the rules they all follow.

A workflow function is re-run from the top every time it is resumed. Each durable call takes the
next call id (see ``context``); if an outcome is recorded under that id it is returned (or its
completable error raised) without running anything, otherwise the call runs and its outcome is
committed before the workflow continues.

Errors mean different things:

* completable (``CompletableError`` or anything the ErrorMarshaler marshals): recorded, raised in
  the workflow; if it leaves the workflow, the workflow ends FAILED.
* retryable: retried by the activity's RetryPolicy; exhaustion is incompletable.
* anything else, timeouts included: the run is *doomed*. The error is recorded and the workflow is
  SUSPENDED for the Recovery Worker, even if workflow code catches the exception, so an
  unexpected failure can never complete a saga.
* a failed store call (the database unreachable, say) dooms the run too (see ``_store_call``):
  the call has no answer, so the run may not go on as if it had one.

Cancellation is cooperative: a cancel request (or the workflow's deadline) is delivered once, as
``Cancelled`` raised by the next durable call that has no recorded outcome (an activity about
to start, a retry after its backoff, a timer or signal or child still waited for). That call
records the cancellation as its outcome, so every replay raises it at the same call. Calls in
flight (an activity attempt running) finish first, and compensations are never interrupted.

The calls themselves live in ``activities`` (activities and compensations) and ``waits``
(timers, signals, children); ``executor.Execution`` puts them together and runs the workflow.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from typing import TYPE_CHECKING, Any, ParamSpec, Protocol, TypeVar

from sagaway import errors, serialization
from sagaway._engine import context
from sagaway._engine.cancel_delivery import CancelDelivery
from sagaway._engine.cancellation import is_cancel_step
from sagaway.states import ErrorKind, StepKind, StepStatus
from sagaway.store.records import Lease, StepRecord, WorkflowRecord

if TYPE_CHECKING:
    from sagaway._engine.engine import Engine
    from sagaway.registry import WorkflowDef

T = TypeVar("T")

WAIT_IN_PROCESS = 1.0
"""Timers shorter than this (seconds) sleep in the worker instead of unloading the workflow."""

FINAL = frozenset({StepStatus.COMPLETED, StepStatus.FAILED})
"""Outcomes a replay returns without running the call again."""

_ORDERED_KINDS = frozenset(
    {StepKind.ACTIVITY, StepKind.COMPENSATION, StepKind.SIGNAL, StepKind.CHILD_RESULT}
)
"""Steps whose recorded end is the moment the workflow received their outcome."""


class Unload(BaseException):
    """Unwinds a workflow that now waits durably (WAITING): it is re-run when the wait ends.

    A BaseException so workflow code's ``except Exception`` cannot stop the unwinding.
    """


class ReplayFrontier(BaseException):
    """A replay check (``replaying.replay``) reached the end of the recorded history: the next
    call would run for the first time, so the check stops here. A BaseException, as Unload."""


_P = ParamSpec("_P")
_R = TypeVar("_R")


def engine_code(
    method: Callable[_P, Coroutine[Any, Any, _R]],
) -> Callable[_P, Coroutine[Any, Any, _R]]:
    """A durable call: tasks the engine creates while serving it are not workflow branches."""

    @functools.wraps(method)
    async def serve(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        branch = context.current_branch()
        if branch is None:
            return await method(*args, **kwargs)
        branch.engine_depth += 1  # a plain counter: this wraps every durable call
        try:
            return await method(*args, **kwargs)
        finally:
            branch.engine_depth -= 1

    return serve


class WorkerSlot(Protocol):
    """One of the Worker's ``concurrency`` slots, as the execution holding it sees it.

    An execution holds its slot while its code or an activity of it runs, and gives it back
    while it only waits in the worker (a child's end, a signal, a short timer): otherwise
    parents waiting on children could hold every slot while the children wait for one.
    """

    async def acquire(self) -> None:
        """Hold the slot (no-op if held); waits while every slot is taken."""

    def release(self) -> None:
        """Give the slot back (no-op if not held)."""


class ExecutionBase:
    """One attempt at running a workflow execution, owned through ``lease``: its state and the
    steps every durable call takes (replay, fencing, recording, unloading)."""

    def __init__(
        self,
        engine: Engine,
        defn: WorkflowDef,
        record: WorkflowRecord,
        lease: Lease,
        steps: list[StepRecord],
        slot: WorkerSlot | None = None,
    ) -> None:
        self.engine = engine
        self.defn = defn
        self.record = record
        self.lease = lease
        self.recorded = {step.call_id: step for step in steps}
        self.doomed: BaseException | None = None
        """First incompletable failure; the run will be suspended with it."""
        self.outcome = "stopped"
        """How this run left (telemetry): ``completed``, ``suspended``, ``waiting``, ..."""
        self.cancel_requested = False
        """Stopped because it was ended by request (terminate) or elsewhere: no release."""
        self.cancels = CancelDelivery(self, steps)
        """Its cancellation's state and delivery."""
        self._init_replay()
        self.inflight = 0
        """Durable calls running now (activities, in-worker waits): a workflow is unloaded to
        wait durably only when nothing else of it is running."""
        self.forward_calls = 0
        """Activity calls (not compensations) being made now, retries included (``settle``)."""
        self._inflight_dropped = asyncio.Event()
        """Set when a durable call stops being in flight (see ``_note_dropped``)."""
        self._wakers: set[asyncio.Event] = set()
        """Events of waits in the worker (a timer, a signal, a child's end): set when other work
        stops, so the wait looks again whether it is all that runs and can unload the workflow
        instead of holding its lease until the next poll."""
        self._unload_write = asyncio.Event()
        """Clear while a wait's store call that may unload the workflow is under way."""
        self._unload_write.set()
        self.slot = slot
        self.activities = 0
        """Activity attempts running now; each needs the worker slot."""
        self.waiting = 0
        """Branches waiting in the worker now (a child's end, a signal, a short timer). While
        some wait and no activity runs, the workflow only waits: it holds no slot."""
        self.unloading = False
        self.lease_lost = False
        """A fenced write found another owner: nothing more may run here."""
        self.act_until = float("-inf")
        """Until when an activity attempt may begin without renewing the lease first: the
        latest expiry heard (its claim, then each renewal), less a third of the lease for
        error between the clocks of the processes (see ``lease_renewed``)."""
        self.lease_renewed(lease.expires_at)
        self.stopped = False
        """The workflow function has returned or unwound (an end, an unload, a shutdown): a
        branch left running may start nothing more."""
        self.finishing = False
        """Its end is being written: an "ended" notice for it is its own, not a cancel."""
        self._init_writes(steps)

    def _init_writes(self, steps: list[StepRecord]) -> None:
        self.unrecorded: list[StepRecord] = []
        """Outcomes of finished activities not written yet. Each is written before the workflow's
        next durable action (another activity, a wait, a child, its end, a suspension), so a
        crash can only re-run an activity whose completion no later step depended on; the last
        one before the end goes in the same transaction as the end."""
        self._flush_lock = asyncio.Lock()
        self._write_error: BaseException | None = None
        """Why pending outcomes could not be written: nothing may run past them (sticky)."""
        self._last_completion = max(
            (s.ended_at or 0.0 for s in steps if s.kind in _ORDERED_KINDS and s.status in FINAL),
            default=0.0,
        )
        """Completion time of the latest outcome received (see ``completion_time``). Only
        final steps count: a receive still WAITING records its deadline as ``ended_at``, which
        is no completion (counted, a signal answered before it was dated at the deadline,
        and so was every step after it)."""

    def _init_replay(self) -> None:
        self.replay_only = False
        """A replay check: recorded calls return their outcomes, and the first call with no
        final outcome raises ``ReplayFrontier`` instead of running (nothing is written)."""
        self.replayed_ids: set[str] = set()
        """The recorded calls the code made again (a replay check counts them)."""

    @property
    def key(self) -> str:
        return self.record.key

    @property
    def giving_up_lease(self) -> bool:
        """A write of its own that gives the lease up (its end, or a wait's WAITING) is under
        way or done: a heartbeat that does not find the lease then raced that write; the lease
        was not lost. (Had it been, the fenced write fails and the execution stops by itself.)"""
        return self.finishing or self.unloading or not self._unload_write.is_set()

    def completion_time(self) -> float:
        """Now, as the recorded completion time of an outcome: strictly after every earlier
        completion of this execution (in any process, whatever its clock), so recorded times
        give the order in which the workflow received its outcomes; replays rebuild the order
        of compensations from them (``context.note_completion``)."""
        self._last_completion = max(self.engine.clock.now(), self._last_completion + 1e-6)
        return self._last_completion

    def _lost(self) -> errors.Cancelled:
        """What stops the workflow code once a fenced write found the lease gone (every
        branch: one that goes on, as after ``gather(return_exceptions=True)``, must not start
        an effect the new owner runs too)."""
        self.lease_lost = True
        return errors.Cancelled(f"lost ownership of workflow {self.key!r}")

    def lease_renewed(self, until: float) -> None:
        """A renewal was heard: the lease holds until ``until``."""
        self.act_until = max(self.act_until, until - self.engine.lease_timeout / 3)

    async def confirm_lease(self) -> None:
        """Renew the lease before an attempt once it may have lapsed (no renewal heard for
        too long: a stalled heartbeat, a run that waited long for a worker slot): another
        process may have taken the run over, and must be the only one to run the attempt. A
        renewal whose answer comes too late to count is made again."""
        token = self.lease.token
        while self.engine.clock.now() >= self.act_until:
            kept, renewed_to = await self._store_call(self.engine.renew_leases([token]))
            if token not in kept:
                raise self._lost()
            self.lease_renewed(renewed_to)

    def _describe(self, exc: BaseException, kind: ErrorKind) -> str:
        return serialization.describe_error(exc, kind, self.engine.marshaler)

    async def _store_call(
        self, call: Awaitable[T], *, answers: tuple[type[Exception], ...] = ()
    ) -> T:
        """Await a store call of this run.

        LeaseLost: another owner carries on, so the workflow stops here. Any other failure
        (the database unreachable, a transaction that kept failing) dooms the run, as an
        incompletable error does: workflow code may catch the exception, but nothing more runs
        and the run cannot complete; it is suspended (or, if that cannot be written either, its
        lease lapses) and resumes from its last record. ``answers`` are errors that are the
        call's answer rather than its failure (a child start's IdempotencyConflict).
        """
        try:
            return await call
        except errors.LeaseLost:
            raise self._lost() from None
        except answers:
            raise
        except Exception as exc:
            if self.doomed is None:
                self.doomed = exc
            raise

    def _replayed(self, call_id: str, kind: StepKind, name: str) -> StepRecord | None:
        step = self.recorded.get(call_id)
        if step is not None and (step.name != name or step.kind is not kind):
            # Doomed, so workflow code that catches it cannot complete on a fallback.
            self.doomed = divergence(self.defn.name, self.key, step, f"{kind.value} {name!r}")
            raise self.doomed
        if self.replay_only:
            if step is None or step.status not in FINAL:
                raise ReplayFrontier(call_id)
            self.replayed_ids.add(call_id)
        if step is not None and is_cancel_step(step):
            # Where the cancellation was delivered before: delivered here again.
            self.cancels.delivered = True
            context.note_completion(step.ended_at or 0.0)
            message = (serialization.error_summary(step.error) or {}).get("message", "")
            raise errors.Cancelled(str(message))
        return step

    def _step(
        self,
        call_id: str,
        kind: StepKind,
        name: str,
        status: StepStatus,
        *,
        started_at: float,
        ended_at: float | None,
        attempts: int = 1,
        result: str | None = None,
        error: str | None = None,
    ) -> StepRecord:
        """The record of one durable call of this run."""
        return StepRecord(
            run_id=self.record.run_id,
            call_id=call_id,
            kind=kind,
            name=name,
            status=status,
            attempts=attempts,
            result=result,
            error=error,
            started_at=started_at,
            ended_at=ended_at,
        )

    def _replay_outcome(self, previous: StepRecord, decode: Callable[[str | None], Any]) -> Any:
        """A replayed call's recorded outcome: its result, or its completable error raised."""
        context.note_completion(previous.ended_at or 0.0)
        if previous.status is StepStatus.COMPLETED:
            return decode(previous.result)
        assert previous.error is not None
        raise serialization.error_from_record(previous.error, self.engine.marshaler)

    def _check_usable(self) -> None:
        if self.lease_lost:
            raise self._lost()
        if self.stopped:
            raise errors.Cancelled(f"workflow {self.key!r} no longer runs in this process")
        if self.unloading:
            raise Unload()
        if self.doomed is not None:
            # Workflow code swallowed an incompletable error; nothing more may run.
            raise self.doomed

    async def _record(self, step: StepRecord, *, defer: bool = False) -> None:
        """Record ``step``: now, or (``defer``) with the next durable action (see unrecorded)."""
        self.recorded[step.call_id] = step
        if defer:
            self.unrecorded.append(step)
            return
        await self.flush()
        await self._write([step])

    async def _write(self, steps: list[StepRecord]) -> None:
        store, token = self.engine.store, self.lease.token
        if len(steps) == 1:
            await self._store_call(store.record_step(steps[0], token=token))
        elif steps:
            await self._store_call(
                asyncio.gather(*(store.record_step(s, token=token) for s in steps))
            )

    def _flushed(self) -> bool:
        """Nothing pending to write, no flush under way, no write that failed."""
        return self._write_error is None and not self.unrecorded and not self._flush_lock.locked()

    async def flush(self) -> None:
        """Write the outcomes of finished activities not written yet (see unrecorded)."""
        if self._flushed():
            return
        # The lock makes a flush wait for one another branch started: nothing runs past a
        # flush before every earlier outcome is committed.
        async with self._flush_lock:
            await self._write_pending()

    async def _write_pending(self) -> None:
        # Called with the flush lock held.
        if self._write_error is not None:
            raise self._write_error
        while self.unrecorded:
            steps, self.unrecorded = self.unrecorded, []
            try:
                await self._write(steps)
            except asyncio.CancelledError:
                # This branch was cancelled: the outcomes stay pending for the next flush
                # (another branch's, or the worker's at shutdown); rewriting one is harmless.
                self.unrecorded[:0] = steps
                raise
            except BaseException as exc:
                self.unrecorded[:0] = steps
                self._write_error = exc
                raise

    async def _unload_guard(
        self, unload: bool, call: Awaitable[T], *, unloads: Callable[[T], bool]
    ) -> T:
        """A store call that may commit WAITING and give the lease up (``unload``): while it
        is under way no other branch may start an effect, and if it did unload, they see it."""
        if not unload:
            return await self._store_call(call)
        self._unload_write.clear()
        try:
            result = await self._store_call(call)
            if unloads(result):
                self.unloading = True
            return result
        finally:
            self._unload_write.set()

    async def _wait(
        self, *, waiting_for: str, next_run_at: float | None, step: StepRecord | None
    ) -> None:
        """Commit WAITING and unload the workflow (raises Unload): a timer, a signal, a slot of
        a cluster-limited queue.

        Called with nothing else in flight; the guard keeps it so while the write is under way
        (a branch starting an activity meanwhile would run it after the lease is given up).
        """
        engine = self.engine
        await self._unload_guard(
            True,
            engine.store.wait_workflow(
                self.record.run_id,
                token=self.lease.token,
                waiting_for=waiting_for,
                next_run_at=next_run_at,
                step=step,
                now=engine.clock.now(),
            ),
            unloads=lambda _: True,
        )
        # Recovery may have planned its next scan for later than this wait's end.
        engine.wake_recovery()
        raise Unload()

    def ready_to_act(self) -> bool:
        """Whether ``_before_durable_action`` would return at once (nothing to flush or wait
        for, the run usable): the common case, checked without a coroutine."""
        return (
            self._flushed()
            and self._unload_write.is_set()
            and not (self.lease_lost or self.stopped or self.unloading or self.finishing)
            and self.doomed is None
        )

    async def _before_durable_action(self) -> None:
        """Flush, then check the run may still act: a flush can wait, and meanwhile another
        branch may have unloaded the workflow, doomed it, or ended it."""
        await self.flush()
        if not self._unload_write.is_set():
            await self._unload_write.wait()  # a wait's write that may give the lease up
        self._check_may_act()

    def _check_may_act(self) -> None:
        """Raise what stops a new durable action now (see ``_check_usable``), or
        ``Cancelled`` once the run's end is being written."""
        self._check_usable()
        if self.finishing:
            raise errors.Cancelled(f"workflow {self.key!r} has ended")

    def _note_dropped(self) -> None:
        """A durable call is no longer in flight: waits in the worker look again."""
        self._inflight_dropped.set()
        for waker in self._wakers:
            waker.set()

    @contextlib.contextmanager
    def _busy(self) -> Iterator[None]:
        """A durable call in flight: while one is, no wait of a sibling unloads the workflow."""
        self.inflight += 1
        try:
            yield
        finally:
            self.inflight -= 1
            self._note_dropped()

    @contextlib.contextmanager
    def _waiting_here(self) -> Iterator[None]:
        """A branch waits in the worker: with no activity running, the slot is given back."""
        with self._busy():
            self.waiting += 1
            if self.activities == 0 and self.slot is not None:
                self.slot.release()
            try:
                yield
            finally:
                self.waiting -= 1


def divergence(workflow: str, key: str, step: StepRecord, asked: str) -> errors.NonDeterminismError:
    """The error of code that no longer makes the durable call ``step`` records: which call,
    what was recorded, what the code asks for, and the two ways to deploy such a change."""
    recorded = f"{step.kind.value} {step.name!r}"
    hint = (
        f"keep `sw.deprecate_patch({step.name!r})` at this point while executions that "
        "recorded it remain"
        if step.kind is StepKind.PATCH
        else 'put the new code behind `if sw.patched("<change id>"):` so executions that '
        "passed this point keep the old path"
    )
    return errors.NonDeterminismError(
        f"workflow {workflow!r} ({key}): durable call {step.call_id} was recorded "
        f"as {recorded}, but the code now calls {asked}. Workflow code must make the same "
        f"durable calls in the same order on every run of an execution: {hint}, or fork it "
        f"from this step onto the new code (`sagaway fork {key} --from-step N --new-key NEW`; "
        "`sagaway replay` checks a deploy before it happens; see docs/patching.md)",
        call_id=step.call_id,
        recorded=recorded,
        requested=asked,
    )
