"""Runs one workflow execution: replays recorded outcomes, records new ones, applies error kinds.

A workflow function is re-run from the top every time it is resumed. Each durable call takes the
next call id (see ``context``); if an outcome is recorded under that id it is returned (or its
completable error raised) without running anything, otherwise the call runs and its outcome is
committed before the workflow continues.

Error semantics (an expected business failure, a transient failure and an unexpected failure
mean different things, and are handled differently):

* completable (``CompletableError`` or anything the ErrorMarshaler marshals): recorded, raised in
  the workflow; if it leaves the workflow, the workflow ends FAILED.
* retryable: retried by the activity's RetryPolicy; exhaustion is incompletable.
* anything else, timeouts included: the run is *doomed*. The error is recorded and the workflow is
  SUSPENDED for the Recovery Worker, even if workflow code catches the exception, so an
  unexpected failure can never complete a saga.
* a failed store call (the database unreachable, say) dooms the run too (see ``_store_call``):
  the call has no answer, so the run may not go on as if it had one.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import dataclasses
import functools
import logging
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from typing import TYPE_CHECKING, Any, ParamSpec, Protocol, TypeVar

import pydantic
import pydantic_core

from sagaway import activity as activity_mod
from sagaway import errors, events, retry, serialization
from sagaway._engine import context, keys
from sagaway._engine.states import StepKind, StepStatus, WorkflowStatus
from sagaway.clock import wait_event_or_sleep
from sagaway.store.records import Lease, StepRecord, WorkflowRecord

if TYPE_CHECKING:
    from sagaway._engine.engine import Engine
    from sagaway.registry import ActivityDef, WorkflowDef

logger = logging.getLogger(__name__)
T = TypeVar("T")

_WAIT_IN_PROCESS = 1.0
"""Timers shorter than this (seconds) sleep in the worker instead of unloading the workflow."""


_FINAL = frozenset({StepStatus.COMPLETED, StepStatus.FAILED})
"""Outcomes a replay returns without running the call again."""

_ORDERED_KINDS = frozenset(
    {StepKind.ACTIVITY, StepKind.COMPENSATION, StepKind.SIGNAL, StepKind.CHILD_RESULT}
)
"""Steps whose recorded end is the moment the workflow received their outcome."""


class _Unload(BaseException):
    """Unwinds a workflow that now waits durably (WAITING): it is re-run when the wait ends.

    A BaseException so workflow code's ``except Exception`` cannot stop the unwinding.
    """


_P = ParamSpec("_P")
_R = TypeVar("_R")


def _engine_code(
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


class Execution:
    """One attempt at running a workflow execution, owned through ``lease``."""

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
        self.cancel_requested = False
        self.inflight = 0
        self.forward_calls = 0
        """Activity calls (not compensations) being made now, retries included (``settle``)."""
        self._inflight_dropped = asyncio.Event()
        self._wakers: set[asyncio.Event] = set()
        self._unload_write = asyncio.Event()
        """Clear while a wait's store call that may unload the workflow is under way."""
        self._unload_write.set()
        """Set when a durable call stops being in flight: a wait in the worker (a timer, a
        signal, a child's end) looks again whether it is now all that runs, and can unload the
        workflow instead of holding its lease until the next poll."""
        """Durable calls running now (activities, in-worker waits): a workflow is unloaded to
        wait durably only when nothing else of it is running."""
        self.slot = slot
        self.activities = 0
        """Activity attempts running now; each needs the worker slot."""
        self.waiting = 0
        """Branches waiting in the worker now (a child's end, a signal, a short timer). While
        some wait and no activity runs, the workflow only waits: it holds no slot."""
        self.unloading = False
        self.lease_lost = False
        """A fenced write found another owner: nothing more may run here."""
        self.finishing = False
        """Its end is being written: an "ended" notice for it is its own, not a cancel."""
        self.unrecorded: list[StepRecord] = []
        """Outcomes of finished activities not written yet. Each is written before the workflow's
        next durable action (another activity, a wait, a child, its end, a suspension), so a
        crash can only re-run an activity whose completion no later step depended on; the last
        one before the end goes in the same transaction as the end."""
        self._flush_lock = asyncio.Lock()
        self._write_error: BaseException | None = None
        """Why pending outcomes could not be written: nothing may run past them (sticky)."""
        self._last_completion = max(
            (s.ended_at or 0.0 for s in steps if s.kind in _ORDERED_KINDS), default=0.0
        )
        """Completion time of the latest outcome received (see ``completion_time``)."""

    @property
    def key(self) -> str:
        return self.record.key

    def completion_time(self) -> float:
        """Now, as the recorded completion time of an outcome: strictly after every earlier
        completion of this execution (in any process, whatever its clock), so recorded times
        give the order in which the workflow received its outcomes; replays rebuild the order
        of compensations from them (``context.note_completion``)."""
        self._last_completion = max(self.engine.clock.now(), self._last_completion + 1e-6)
        return self._last_completion

    # ------------------------------------------------------------------ top level

    async def run(self) -> None:
        """Run the workflow function to its end, a suspension, or loss of ownership."""
        engine = self.engine
        token = context.enter(self)
        try:
            try:
                args, kwargs = self.defn.codec.decode_args(self.record.args)
                value = await self.defn.fn(*args, **kwargs)
            except errors.Cancelled:
                return  # ownership lost or workflow ended by request; the new owner carries on
            except _Unload:
                self._unloaded()
                return
            except asyncio.CancelledError:
                if self.cancel_requested:
                    return
                raise
            except Exception as exc:
                if self.unloading:
                    # Code caught the unwinding (``gather(return_exceptions=True)``) and raised
                    # something else: the wait is what counts.
                    self._unloaded()
                    return
                if self.doomed is not None:
                    await self._suspend(self.doomed)
                elif engine.is_completable(exc):
                    await self._finish(
                        WorkflowStatus.FAILED, None, self._describe(exc, "completable")
                    )
                elif isinstance(exc, errors.WorkflowCancelled):
                    # A child it waited for was cancelled or terminated: the parent ends too
                    # (after its Saga compensated), instead of replaying that end forever.
                    await self._finish(
                        WorkflowStatus.CANCELLED, None, self._describe(exc, "cancelled")
                    )
                else:
                    await self._suspend(exc)
                return
            if self.unloading:
                # Returned although a branch unwound to wait (code swallowed the unwinding):
                # the lease is given up and nothing more may be written.
                self._unloaded()
                return
            if self.doomed is not None:
                await self._suspend(self.doomed)
                return
            try:
                result = self.defn.codec.encode_result(value, engine.payload_limit)
            except errors.PayloadError as exc:
                await self._suspend(exc)
                return
            await self._finish(WorkflowStatus.COMPLETED, result, None)
        except (errors.LeaseLost, errors.Cancelled):
            logger.info(
                "lost ownership of workflow %s; another worker continues it",
                self.key,
                extra={"action": "lease_lost", "workflow_id": self.key},
            )
        finally:
            context.leave(token)

    def _unloaded(self) -> None:
        """WAITING was committed with the wait, the lease given up: the wait's end re-runs it."""
        self.engine.channel.publish(events.WorkflowWaiting(self.record.run_id, self.key))

    async def _finish(self, status: WorkflowStatus, result: str | None, error: str | None) -> None:
        engine = self.engine
        self.finishing = True
        async with self._flush_lock:
            final_step = self.unrecorded.pop() if self.unrecorded else None
            try:
                await self._write_pending()  # more than one: parallel branches ended together
                now = engine.clock.now()
                await self._store_call(
                    engine.store.finish_workflow(
                        self.record.run_id,
                        token=self.lease.token,
                        status=status,
                        result=result,
                        error=error,
                        now=now,
                        final_step=final_step,
                        has_parent=self.record.parent_key is not None,
                    )
                )
            except BaseException:
                # Not known to be written (a cancelled write may have been aborted): the last
                # outcome stays pending, so a shutdown flush still records it. If the end did
                # commit, that fenced write is refused harmlessly.
                if final_step is not None:
                    self.unrecorded.append(final_step)
                raise
        logger.debug(
            "workflow %s %s",
            self.key,
            status.value,
            extra={"action": "workflow_ended", "workflow_id": self.key, "status": status.value},
        )
        ended = dataclasses.replace(
            self.record,
            status=status,
            result=result,
            error=error,
            ended_at=now,
            updated_at=now,
            lease_owner=None,
            lease_expires_at=None,
            next_run_at=None,
        )
        engine.remember_end(ended)
        engine.channel.publish(events.WorkflowEnded(self.record.run_id, self.key, status, ended))

    async def _suspend(self, exc: BaseException) -> None:
        engine = self.engine
        await self.flush()  # what did finish stays done
        error = self._describe(exc, "incompletable")
        now = engine.clock.now()
        delay = engine.suspend_backoff.interval(self.record.suspend_count + 1)
        await engine.store.suspend_workflow(
            self.record.run_id,
            token=self.lease.token,
            error=error,
            now=now,
            next_run_at=now + delay,
        )
        logger.warning(
            "workflow %s suspended by %s: %s; recovery retries it in %.1fs",
            self.key,
            type(exc).__name__,
            exc,
            delay,
            extra={"action": "workflow_suspended", "workflow_id": self.key},
        )
        engine.channel.publish(events.WorkflowSuspended(self.record.run_id, self.key, error))

    def _lost(self) -> errors.Cancelled:
        """What stops the workflow code once a fenced write found the lease gone (every
        branch: one that goes on, as after ``gather(return_exceptions=True)``, must not start
        an effect the new owner runs too)."""
        self.lease_lost = True
        return errors.Cancelled(f"lost ownership of workflow {self.key!r}")

    def _describe(self, exc: BaseException, kind: str) -> str:
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

    # ------------------------------------------------------------------ durable calls

    def _replayed(self, call_id: str, kind: StepKind, name: str) -> StepRecord | None:
        step = self.recorded.get(call_id)
        if step is not None and (step.name != name or step.kind is not kind):
            # Doomed, so workflow code that catches it cannot complete on a fallback.
            self.doomed = errors.NonDeterminismError(
                f"workflow {self.defn.name!r} ({self.key}): durable call {call_id} was recorded "
                f"as {step.kind.value} {step.name!r}, but the code now calls {kind.value} "
                f"{name!r}; workflow code must make the same durable calls in the same order "
                "on every run (deploy changes only for new workflows, or finish old ones first)"
            )
            raise self.doomed
        return step

    def _check_usable(self) -> None:
        if self.lease_lost:
            raise self._lost()
        if self.unloading:
            raise _Unload()
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

    async def flush(self) -> None:
        """Write the outcomes of finished activities not written yet (see unrecorded)."""
        if self._write_error is None and not self.unrecorded and not self._flush_lock.locked():
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

    async def _before_durable_action(self) -> None:
        """Flush, then check the run may still act: a flush can wait, and meanwhile another
        branch may have unloaded the workflow, doomed it, or ended it."""
        await self.flush()
        if not self._unload_write.is_set():
            await self._unload_write.wait()  # a wait's write that may give the lease up
        self._check_usable()
        if self.finishing:
            raise errors.Cancelled(f"workflow {self.key!r} has ended")

    @_engine_code
    async def call_activity(
        self,
        defn: ActivityDef,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        call_id: str,
        seq: int,
        *,
        policy: retry.RetryPolicy,
        timeout: float | None,
        compensation: bool = False,
    ) -> Any:
        """Run (or replay) one activity call and return its result."""
        forward = not compensation  # what a saga's compensation waits for (``settle``)
        if forward:
            self.forward_calls += 1
        try:
            return await self._call_activity(
                defn,
                args,
                kwargs,
                call_id,
                seq,
                policy=policy,
                timeout=timeout,
                compensation=compensation,
            )
        finally:
            if forward:
                self.forward_calls -= 1
                self._note_dropped()

    async def settle(self) -> None:
        """Wait until no activity of the workflow runs (compensations aside).

        A saga compensates only steps whose outcome is known, in reverse order of completion:
        when a gather branch fails, its siblings' activities still run, and their steps must
        complete (and register their compensations) before the first compensation is chosen.
        """
        while self.forward_calls:
            self._inflight_dropped.clear()
            await self._inflight_dropped.wait()

    async def _call_activity(
        self,
        defn: ActivityDef,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        call_id: str,
        seq: int,
        *,
        policy: retry.RetryPolicy,
        timeout: float | None,
        compensation: bool = False,
    ) -> Any:
        self._check_usable()
        kind = StepKind.COMPENSATION if compensation else StepKind.ACTIVITY
        previous = self._replayed(call_id, kind, defn.name)
        if previous is not None and previous.status in _FINAL:
            context.note_completion(previous.ended_at or 0.0)
            if previous.status is StepStatus.COMPLETED:
                return defn.codec.decode_result(previous.result)
            assert previous.error is not None
            raise serialization.error_from_record(previous.error, self.engine.marshaler)
        engine = self.engine
        # An effect runs only once every earlier outcome is durable.
        await self._before_durable_action()
        if compensation:
            policy = dataclasses.replace(policy, maximum_attempts=0)  # until it succeeds
        total = previous.attempts if previous else 0
        started_at = previous.started_at if previous else engine.clock.now()
        info_base = activity_mod.ActivityInfo(
            workflow_key=self.key,
            run_id=self.record.run_id,
            activity_name=defn.name,
            call_id=call_id,
            sequence=seq,
            attempt=0,
            idempotency_key=keys.derived_key(self.record, call_id),
            is_compensation=compensation,
        )
        local_attempt = 0
        # In flight for the whole call, the writes and backoff sleeps between attempts included:
        # a sibling branch must not unload the workflow while this one will try again.
        self.inflight += 1
        try:
            while True:
                local_attempt += 1
                total += 1
                info = dataclasses.replace(info_base, attempt=total)
                try:
                    value = await self._invoke(defn, args, kwargs, info, timeout)
                    result = defn.codec.encode_result(value, engine.payload_limit)
                except Exception as exc:
                    outcome = self._classify(exc, compensation)
                    step = StepRecord(
                        run_id=self.record.run_id,
                        call_id=call_id,
                        kind=kind,
                        name=defn.name,
                        status=outcome,
                        attempts=total,
                        result=None,
                        error=self._describe(exc, outcome.value.lower()),
                        started_at=started_at,
                        ended_at=engine.clock.now(),
                    )
                    if outcome is StepStatus.FAILED:
                        step = dataclasses.replace(step, ended_at=self.completion_time())
                        context.note_completion(step.ended_at or 0.0)
                        await self._record(step, defer=True)
                        raise
                    if outcome is StepStatus.RETRYING and policy.allows(local_attempt + 1):
                        await self._record(step)
                        with self._waiting_here():  # a backoff holds no worker slot
                            await engine.clock.sleep(policy.interval(local_attempt))
                        self._check_usable()  # the lease may have been lost meanwhile
                        continue
                    if outcome is StepStatus.RETRYING:
                        exhausted = errors.RetriesExhausted(
                            f"activity {defn.name!r} failed {local_attempt} times with a "
                            f"retryable error (policy allows {policy.maximum_attempts}): {exc}"
                        )
                        exhausted.__cause__ = exc
                        step = dataclasses.replace(step, error=self._describe(exhausted, "error"))
                        self.doomed = exhausted
                        await self._record(dataclasses.replace(step, status=StepStatus.ERROR))
                        raise exhausted from exc
                    self.doomed = exc
                    await self._record(dataclasses.replace(step, status=StepStatus.ERROR))
                    raise
                step = StepRecord(
                    run_id=self.record.run_id,
                    call_id=call_id,
                    kind=kind,
                    name=defn.name,
                    status=StepStatus.COMPLETED,
                    attempts=total,
                    result=result,
                    error=None,
                    started_at=started_at,
                    ended_at=self.completion_time(),
                )
                context.note_completion(step.ended_at or 0.0)
                await self._record(step, defer=True)
                # Return what replay will return, so the first run and every replay agree.
                return defn.codec.decode_result(result)
        finally:
            self.inflight -= 1
            self._note_dropped()

    def _classify(self, exc: BaseException, compensation: bool) -> StepStatus:
        if compensation:
            return StepStatus.RETRYING  # compensations retry every failure until they succeed
        if isinstance(exc, errors.RetryableError):
            return StepStatus.RETRYING
        if self.engine.is_completable(exc):
            return StepStatus.FAILED
        return StepStatus.ERROR

    async def _invoke(
        self,
        defn: ActivityDef,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        info: activity_mod.ActivityInfo,
        timeout: float | None,
    ) -> Any:
        engine = self.engine
        if self.slot is not None:
            await self.slot.acquire()  # given back while the workflow only waited
        self.activities += 1
        info_token = activity_mod._current.set(info)
        wf_token = context.suspend_workflow_context()
        try:
            async with engine.queue_slot(defn.queue):
                if defn.is_async:
                    work: Awaitable[Any] = defn.fn(*args, **kwargs)
                else:
                    call = functools.partial(
                        contextvars.copy_context().run, _sync_contained, defn, *args, **kwargs
                    )
                    work = asyncio.get_running_loop().run_in_executor(engine.thread_pool, call)
                work = _contained(work, defn.name)
                if timeout is None:
                    return await work
                return await _with_timeout(work, timeout, engine, defn.name)
        finally:
            context.leave(wf_token)
            activity_mod._current.reset(info_token)
            self.activities -= 1
            if self.activities == 0 and self.waiting and self.slot is not None:
                self.slot.release()  # the last activity ended while branches wait

    def _note_dropped(self) -> None:
        """A durable call is no longer in flight: waits in the worker look again."""
        self._inflight_dropped.set()
        for waker in self._wakers:
            waker.set()

    @contextlib.contextmanager
    def _waiting_here(self) -> Iterator[None]:
        """A branch waits in the worker: with no activity running, the slot is given back."""
        self.inflight += 1
        self.waiting += 1
        if self.activities == 0 and self.slot is not None:
            self.slot.release()
        try:
            yield
        finally:
            self.inflight -= 1
            self.waiting -= 1
            self._note_dropped()

    @_engine_code
    async def call_sleep(self, seconds: float, call_id: str) -> None:
        """A durable timer: the wake-up time is recorded, so a resumed workflow sleeps the rest.

        Long sleeps unload the workflow (WAITING, no worker task, no lease) and the Recovery
        Worker re-runs it when the time comes; short ones sleep in the worker.
        """
        self._check_usable()
        engine = self.engine
        previous = self._replayed(call_id, StepKind.SLEEP, "sleep")
        await self._before_durable_action()
        now = engine.clock.now()
        step: StepRecord | None = None
        if previous is not None and previous.result is not None:
            wake_at = float(previous.result)
        else:
            wake_at = now + seconds
            step = StepRecord(
                run_id=self.record.run_id,
                call_id=call_id,
                kind=StepKind.SLEEP,
                name="sleep",
                status=StepStatus.COMPLETED,
                attempts=1,
                result=repr(wake_at),
                error=None,
                started_at=now,
                ended_at=wake_at,
            )
        remaining = wake_at - now
        if remaining >= _WAIT_IN_PROCESS and self.inflight == 0:
            if step is not None:
                self.recorded[call_id] = step
            await self._wait(waiting_for="timer", next_run_at=wake_at, step=step)
        if step is not None:
            await self._record(step)
        while True:
            with self._waiting_here():
                while True:
                    left = wake_at - engine.clock.now()
                    if left <= 0:
                        return
                    if left >= _WAIT_IN_PROCESS and self.inflight == 1:
                        break  # begun beside other work, which has ended: only this timer is left
                    self._inflight_dropped.clear()
                    await wait_event_or_sleep(self._inflight_dropped, engine.clock, left)
            # Wait durably instead of holding a lease (and memory) until the timer fires.
            await self._before_durable_action()
            if self.inflight == 0:
                await self._wait(waiting_for="timer", next_run_at=wake_at, step=None)

    async def _wait(
        self, *, waiting_for: str, next_run_at: float | None, step: StepRecord | None
    ) -> None:
        """Commit WAITING and unload the workflow (raises _Unload).

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
        raise _Unload()

    @_engine_code
    async def call_receive(
        self, name: str, adapter: pydantic.TypeAdapter[Any], timeout: float | None, call_id: str
    ) -> Any:
        """Receive the next signal ``name`` (durably waiting for it), decoded as ``adapter``."""
        self._check_usable()
        engine = self.engine
        previous = self._replayed(call_id, StepKind.SIGNAL, name)
        if previous is not None:
            if previous.status is StepStatus.COMPLETED:
                context.note_completion(previous.ended_at or 0.0)
                return _decode_signal(adapter, previous.result)
            if previous.status is StepStatus.FAILED:
                message = serialization.error_summary(previous.error) or {}
                raise errors.SignalTimeout(str(message.get("message", f"no signal {name!r}")))
        now = engine.clock.now()
        started_at = previous.started_at if previous else now
        if previous is not None:
            deadline = previous.ended_at
        else:
            deadline = None if timeout is None else now + timeout

        def accept(payload: str) -> str | None:
            try:
                _decode_signal(adapter, payload)
            except errors.PayloadError as exc:
                return str(exc)
            return None

        watcher = engine.channel.watch_signals(self.record.run_id)
        try:
            while True:
                # Every pending outcome is written before a wait may unload the workflow (an
                # unload gives the lease up: nothing could be written afterwards).
                await self._before_durable_action()
                now = engine.clock.now()
                expired = deadline is not None and now >= deadline
                if not expired:
                    now = self.completion_time()  # a signal received now is recorded at ``now``
                unload = self.inflight == 0 and not expired
                payload = await self._unload_guard(
                    unload,
                    engine.store.receive_signal(
                        self.record.run_id,
                        token=self.lease.token,
                        name=name,
                        call_id=call_id,
                        started_at=started_at,
                        deadline=deadline,
                        wait=unload,
                        accept=accept,
                        now=now,
                    ),
                    unloads=lambda found: found is None,
                )
                if payload is not None:
                    self.recorded[call_id] = StepRecord(
                        run_id=self.record.run_id,
                        call_id=call_id,
                        kind=StepKind.SIGNAL,
                        name=name,
                        status=StepStatus.COMPLETED,
                        attempts=1,
                        result=payload,
                        error=None,
                        started_at=started_at,
                        ended_at=now,
                    )
                    context.note_completion(now)
                    return _decode_signal(adapter, payload)
                if expired:
                    waited = now - started_at
                    timeout_error = errors.SignalTimeout(
                        f"no signal {name!r} arrived within {waited:.1f}s"
                    )
                    await self._record(
                        StepRecord(
                            run_id=self.record.run_id,
                            call_id=call_id,
                            kind=StepKind.SIGNAL,
                            name=name,
                            status=StepStatus.FAILED,
                            attempts=1,
                            result=None,
                            error=self._describe(timeout_error, "timeout"),
                            started_at=started_at,
                            ended_at=now,
                        )
                    )
                    raise timeout_error
                if unload:
                    self.unloading = True
                    raise _Unload()
                if self.inflight == 0 and not expired:
                    continue  # the other work ended during the read: unload now, not at a poll
                # Another branch is busy: wait here, woken by a local send or by polling.
                wait = engine.poll_interval
                if deadline is not None:
                    wait = min(wait, max(deadline - now, 0.0))
                with self._waiting_here():
                    watcher.clear()
                    # Woken too when the other work of the workflow ends: it may unload then.
                    self._wakers.add(watcher)
                    try:
                        await wait_event_or_sleep(watcher, engine.clock, wait)
                    finally:
                        self._wakers.discard(watcher)
        finally:
            engine.channel.unwatch_signals(self.record.run_id, watcher)

    @_engine_code
    async def call_child(
        self, defn: WorkflowDef, args_json: str, key: str | None, call_id: str
    ) -> str:
        """Start a child workflow once; returns its key."""
        self._check_usable()
        engine = self.engine
        previous = self._replayed(call_id, StepKind.CHILD, defn.name)
        if previous is not None and previous.status is StepStatus.COMPLETED:
            assert previous.result is not None
            child_key: str = serialization._load(previous.result, "child key")
            return child_key
        child_key = key or keys.derived_key(self.record, call_id)
        await self._before_durable_action()
        now = engine.clock.now()
        await self._store_call(
            engine.start_child(defn, args_json, key=child_key, parent_key=self.key),
            answers=(errors.IdempotencyConflict, errors.WorkflowAlreadyExists, ValueError),
        )
        await self._record(
            StepRecord(
                run_id=self.record.run_id,
                call_id=call_id,
                kind=StepKind.CHILD,
                name=defn.name,
                status=StepStatus.COMPLETED,
                attempts=1,
                result=serialization.encode_value(child_key, "child key"),
                error=None,
                started_at=now,
                ended_at=engine.clock.now(),
            )
        )
        return child_key

    @_engine_code
    async def call_child_result(self, defn: WorkflowDef, child_key: str, call_id: str) -> Any:
        """Wait durably for a child workflow's end; its result, or its error raised."""
        self._check_usable()
        engine = self.engine
        previous = self._replayed(call_id, StepKind.CHILD_RESULT, defn.name)
        if previous is not None and previous.status in _FINAL:
            context.note_completion(previous.ended_at or 0.0)
            if previous.status is StepStatus.COMPLETED:
                return defn.codec.decode_result(previous.result)
            assert previous.error is not None
            raise serialization.error_from_record(previous.error, engine.marshaler)
        started_at = engine.clock.now()
        while True:
            await self._before_durable_action()  # as in call_receive: before a possible unload
            unload = self.inflight == 0
            child = await self._unload_guard(
                unload,
                engine.store.wait_for_child(
                    self.record.run_id,
                    token=self.lease.token,
                    child_key=child_key,
                    wait=unload,
                    now=engine.clock.now(),
                ),
                unloads=lambda found: found is not None and not found.status.ended,
            )
            if child is None:
                raise errors.WorkflowNotFound(child_key)
            if child.status.ended:
                break
            if unload:
                self.unloading = True
                raise _Unload()
            # Begun beside other work, the wait stays here (the slot given back) until the
            # child ends or the other work does: then it looks again, and unloads if it is
            # all that is left (a child that never ends must not hold the lease forever).
            with self._waiting_here():
                watcher = asyncio.Event()
                self._wakers.add(watcher)
                try:
                    await _first_of(
                        engine.wait_for_end(child.run_id, child_key, None), watcher.wait()
                    )
                finally:
                    self._wakers.discard(watcher)
        status = (
            StepStatus.COMPLETED if child.status is WorkflowStatus.COMPLETED else StepStatus.FAILED
        )
        error = child.error
        if child.status in (WorkflowStatus.CANCELLED, WorkflowStatus.TERMINATED):
            error = self._describe(
                errors.WorkflowCancelled(child_key, child.status.value, "child workflow"),
                "cancelled",
            )
        step = StepRecord(
            run_id=self.record.run_id,
            call_id=call_id,
            kind=StepKind.CHILD_RESULT,
            name=defn.name,
            status=status,
            attempts=1,
            result=child.result,
            error=error if status is StepStatus.FAILED else None,
            started_at=started_at,
            ended_at=self.completion_time(),
        )
        context.note_completion(step.ended_at or 0.0)
        await self._record(step)
        if status is StepStatus.COMPLETED:
            return defn.codec.decode_result(child.result)
        assert step.error is not None
        raise serialization.error_from_record(step.error, engine.marshaler)


def _decode_signal(adapter: pydantic.TypeAdapter[Any], payload: str | None) -> Any:
    try:
        data = None if payload is None else pydantic_core.from_json(payload)
        return adapter.validate_python(data)
    except (ValueError, pydantic.ValidationError) as exc:
        raise errors.PayloadError(f"signal payload does not fit {adapter}: {exc}") from None


async def _contained(work: Awaitable[Any], name: str) -> Any:
    """Await an activity attempt; a BaseException its code raised becomes ActivityAborted.

    Left alone, SystemExit or KeyboardInterrupt would stop the event loop and the process (and
    every process that claims the workflow next), and a CancelledError would look like a
    cancel of the workflow, which is then released and run again, forever. A CancelledError
    while this task is being cancelled (workflow cancelled, lease lost, shutdown, timeout) is a
    real cancel and goes on.
    """
    try:
        return await work
    except Exception:
        raise
    except asyncio.CancelledError as exc:
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            raise
        raise _aborted(name, exc) from exc
    except BaseException as exc:
        raise _aborted(name, exc) from exc


def _sync_contained(defn: ActivityDef, /, *args: Any, **kwargs: Any) -> Any:
    """Run a sync activity attempt (in a thread); a BaseException becomes ActivityAborted.

    Converted here, in the thread, rather than in the event loop: a GeneratorExit set on the
    future would be thrown into the workflow's task, which Python treats as closing every
    coroutine on the way (see _contained for the rest).
    """
    try:
        return defn.fn(*args, **kwargs)
    except Exception:
        raise
    except BaseException as exc:
        raise _aborted(defn.name, exc) from exc


def _aborted(name: str, exc: BaseException) -> errors.ActivityAborted:
    return errors.ActivityAborted(
        f"activity {name!r} raised {type(exc).__name__}({exc!s}), a BaseException: it is "
        "recorded as an incompletable error and the workflow is suspended; an activity must "
        "fail with an Exception (fix it, then `sagaway retry KEY`)"
    )


async def _with_timeout(work: Any, timeout: float, engine: Engine, name: str) -> Any:
    task = asyncio.ensure_future(work)
    timer = asyncio.ensure_future(engine.clock.sleep(timeout))
    try:
        done, _ = await asyncio.wait({task, timer}, return_when=asyncio.FIRST_COMPLETED)
    except BaseException:
        task.cancel()
        timer.cancel()
        raise
    if task in done:
        timer.cancel()
        return task.result()
    task.cancel()  # a thread cannot be stopped: a sync activity runs on, its result is discarded
    raise errors.ActivityTimeout(f"activity {name!r} did not finish within {timeout}s")


async def _first_of(*waits: Awaitable[Any]) -> None:
    """Until the first of ``waits`` ends (its error raised); the others are cancelled."""
    tasks = [asyncio.ensure_future(w) for w in waits]
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
    for task in done:
        task.result()
