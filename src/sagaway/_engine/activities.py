"""Activity and compensation calls: run once, retried by policy, recorded before use.

An attempt holds the worker slot while it runs; a ``BaseException`` its code raises becomes the
activity's error (``ActivityAborted``) instead of stopping the process.
"""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import functools
import time
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any, NoReturn

from sagaway import activity as activity_mod
from sagaway import errors, observe, retry, serialization
from sagaway._engine import context, deadlines, keys
from sagaway._engine.clock_race import finish_within
from sagaway._engine.execution import FINAL, engine_code
from sagaway._engine.queue_admission import QueueAdmission
from sagaway.states import ErrorKind, StepKind, StepStatus
from sagaway.store.records import StepRecord

if TYPE_CHECKING:
    from sagaway._engine.engine import Engine
    from sagaway.registry import ActivityDef


@dataclasses.dataclass(slots=True)
class _Call:
    """One activity call being made: what its attempts share."""

    defn: ActivityDef
    kind: StepKind
    policy: retry.RetryPolicy
    info: activity_mod.ActivityInfo
    """For the attempt being made (``attempt`` counts across processes)."""
    started_at: float
    priority: int = 3
    """Its level in a saturated queue (1..5)."""
    local: int = 0
    """Attempts made here, by this replay of the run."""
    spent: int = 0
    """Attempts of the retry policy's current round made before this replay reached the call
    (the run was unloaded or taken over between two attempts). The policy counts ``spent +
    local``: a new round begins only when the run is tried again after a suspension."""
    span: observe.Span = observe.NO_SPAN
    """The attempt being made, as telemetry sees it."""
    began: float = 0.0
    """When that attempt began (``time.perf_counter``)."""

    def begin_attempt(self) -> None:
        info = self.info
        self.began = time.perf_counter()
        self.span = observe.attempt(
            self.defn.name,
            info.workflow_key,
            info.run_id,
            info.call_id,
            info.attempt,
            compensation=info.is_compensation,
        )

    def end_attempt(self, outcome: str, error: BaseException | None = None) -> None:
        """Report the attempt (only called with observers installed)."""
        self.span.end(outcome, error)
        self.span = observe.NO_SPAN
        observe.attempt_ended(
            self.defn.name,
            outcome,
            time.perf_counter() - self.began,
            compensation=self.info.is_compensation,
        )


class ActivityCalls(QueueAdmission):
    """The activity calls of an execution."""

    async def settle(self) -> None:
        """Wait until no activity of the workflow runs (compensations aside).

        A saga compensates only steps whose outcome is known, in reverse order of completion:
        when a gather branch fails, its siblings' activities still run, and their steps must
        complete (and register their compensations) before the first compensation is chosen.
        """
        while self.forward_calls:
            self._inflight_dropped.clear()
            await self._inflight_dropped.wait()

    @engine_code
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
        priority: int | None = None,
    ) -> Any:
        """Run (or replay) one activity call and return its result (``priority``: its level
        in a saturated queue; None: ``defn``'s, else the workflow's)."""
        self._check_usable()
        kind = StepKind.COMPENSATION if compensation else StepKind.ACTIVITY
        previous = self._replayed(call_id, kind, defn.name)
        if previous is not None and previous.status in FINAL:
            return self._replay_outcome(previous, defn.codec.decode_result)
        if compensation:
            policy = policy.until_success
        elif previous is not None:
            # It failed before (the run was suspended): once cancelled, it is not tried again.
            await self.cancels.here(call_id, kind, defn.name, previous.started_at, always=True)
        else:
            try:
                await self.cancels.here(call_id, kind, defn.name, self.engine.clock.now())
            except errors.Cancelled:  # an unloaded call in a queue's line: it leaves the line
                await self._leave_line(defn, call_id)
                raise
        # Counted while made (not a compensation): what ``settle`` waits for. Plain counters
        # rather than context managers: this runs for every activity call.
        forward = not compensation
        if forward:
            self.forward_calls += 1
        try:
            # An effect runs only once every earlier outcome is durable.
            if not self.ready_to_act():
                await self._before_durable_action()
            call = self._new_call(defn, kind, policy, call_id, seq, previous)
            call.priority = priority or defn.priority or self.record.priority or 3
            # In flight for the whole call, the writes and backoff sleeps between attempts
            # included: a sibling branch must not unload the workflow while this one will retry.
            self.inflight += 1
            try:
                return await self._attempts(call, args, kwargs, timeout)
            finally:
                self.inflight -= 1
                self._note_dropped()
        finally:
            if forward:
                self.forward_calls -= 1
                self._note_dropped()

    async def _attempts(
        self, call: _Call, args: tuple[Any, ...], kwargs: dict[str, Any], timeout: float | None
    ) -> Any:
        """Attempt the call until it succeeds, is retried no more, or fails for good."""
        defn = call.defn
        while True:
            # Admitted first: an attempt held back by a pause or refused by a cluster-wide
            # limit never began.
            if self.engine.paused_calls.records:
                await self._past_pauses(call)
            limit = self.engine.cluster_limit(defn.queue)
            admitted = None
            if limit is not None:
                admitted = await self._admitted(limit, call)
            if call.local:  # the first attempt's info was built with its number
                call.info = _next_attempt(call.info)
            call.local += 1
            observed = bool(observe.observers)
            if observed:
                call.begin_attempt()
            try:
                if admitted is None:
                    value = await self._invoke(call, args, kwargs, timeout)
                else:
                    async with admitted:
                        value = await self._invoke(call, args, kwargs, timeout)
                result = defn.codec.encode_result(value, self.engine.payload_limit)
            except _NotBegun as not_begun:  # nothing ran: not the activity's failure
                if observed:
                    call.end_attempt("interrupted", not_begun.reason)
                raise not_begun.reason from None
            except deadlines.DeadlineCut as cut:  # cancelled in its task past the deadline
                await self._cut(call, cut, observed)
            except Exception as exc:
                await self._attempt_failed(call, exc, observed)  # raises, unless retried
                continue
            except BaseException as exc:
                if observed:
                    call.end_attempt("interrupted", exc)  # shutdown, lost lease
                raise
            if observed:
                call.end_attempt("completed")
            step = self._step(
                call.info.call_id,
                call.kind,
                defn.name,
                StepStatus.COMPLETED,
                attempts=call.info.attempt,
                result=result,
                started_at=call.started_at,
                ended_at=self.completion_time(),
            )
            context.note_completion(step.ended_at or 0.0)
            await self._record(step, defer=True)
            # Return what replay will return, so the first run and every replay agree.
            return defn.codec.decode_result(result)

    async def _cut(self, call: _Call, cut: deadlines.DeadlineCut, observed: bool) -> NoReturn:
        """The attempt was cancelled past the deadline and its grace: its step is recorded as
        cancelled, and ``Cancelled`` raised in the workflow (its saga compensates)."""
        if observed:
            call.end_attempt("interrupted", cut)
        info = call.info
        await self.cancels.here(
            info.call_id, call.kind, call.defn.name, call.started_at, always=True, detail=str(cut)
        )
        raise AssertionError("unreachable: the deadline has passed") from cut

    def _new_call(
        self,
        defn: ActivityDef,
        kind: StepKind,
        policy: retry.RetryPolicy,
        call_id: str,
        seq: int,
        previous: StepRecord | None,
    ) -> _Call:
        """A call about to make its first attempt here (``previous``: its attempts elsewhere)."""
        return _Call(
            defn=defn,
            kind=kind,
            policy=policy,
            info=activity_mod.ActivityInfo(
                workflow_key=self.key,
                run_id=self.record.run_id,
                activity_name=defn.name,
                call_id=call_id,
                sequence=seq,
                attempt=(previous.attempts if previous else 0) + 1,
                idempotency_key=keys.derived_key(self.record, call_id),
                is_compensation=kind is StepKind.COMPENSATION,
            ),
            started_at=previous.started_at if previous else self.engine.clock.now(),
            spent=_round_so_far(previous),
        )

    async def _attempt_failed(self, call: _Call, exc: Exception, observed: bool) -> None:
        """Record a failed attempt; return after the backoff if it is retried, else raise."""
        engine, attempt = self.engine, call.info.attempt
        outcome = self._classify(exc, call.kind is StepKind.COMPENSATION)
        tries = call.spent + call.local
        retried = outcome is StepStatus.RETRYING and call.policy.allows(tries + 1)
        if observed:
            failed = "failed" if outcome is StepStatus.FAILED else "error"
            call.end_attempt("retrying" if retried else failed, exc)
        step = self._step(
            call.info.call_id,
            call.kind,
            call.defn.name,
            outcome,
            attempts=attempt,
            error=self._describe(exc, ErrorKind(outcome.value.lower())),
            started_at=call.started_at,
            ended_at=engine.clock.now(),
        )
        if retried and step.error is not None:
            step = dataclasses.replace(step, error=serialization.with_round(step.error, tries))
        if outcome is StepStatus.FAILED:
            step = dataclasses.replace(step, ended_at=self.completion_time())
            context.note_completion(step.ended_at or 0.0)
            await self._record(step, defer=True)
            raise exc
        if retried:
            await self._record(step)
            with self._waiting_here():  # a backoff holds no worker slot
                await self._backoff(call, call.policy.interval(tries))
            self._check_usable()  # the lease may have been lost meanwhile
            if call.kind is StepKind.ACTIVITY:
                await self.cancels.here(
                    call.info.call_id, call.kind, call.defn.name, call.started_at
                )
            return
        if outcome is StepStatus.RETRYING:
            exhausted = errors.RetriesExhausted(
                f"activity {call.defn.name!r} failed {tries} times with a retryable "
                f"error (policy allows {call.policy.maximum_attempts}): {exc}"
            )
            exhausted.__cause__ = exc
            self.doomed = exhausted
            error = self._describe(exhausted, ErrorKind.ERROR)
            await self._record(dataclasses.replace(step, status=StepStatus.ERROR, error=error))
            raise exhausted from exc
        self.doomed = exc
        await self._record(dataclasses.replace(step, status=StepStatus.ERROR))
        raise exc

    async def _backoff(self, call: _Call, seconds: float) -> None:
        """Wait before the next attempt; an activity's wait ends early if it is cancelled (a
        compensation's does not: it is never interrupted)."""
        clock = self.engine.clock
        if call.kind is StepKind.COMPENSATION or self.cancels.delivered:
            await clock.sleep(seconds)
            return
        if self.cancels.pending() is not None:
            return
        # Slept in this task (a simulated clock must see who sleeps); ``cancels.deliver``
        # interrupts it.
        task = asyncio.current_task()
        assert task is not None
        self.cancels.backoffs.add(task)
        try:
            await clock.sleep(self.cancels.until(seconds))
        except asyncio.CancelledError:
            if task not in self.cancels.interrupted or task.uncancel() > 0:
                raise  # a real cancel (shutdown, lost lease) goes on
        finally:
            self.cancels.backoffs.discard(task)
            self.cancels.interrupted.discard(task)

    def _classify(self, exc: BaseException, compensation: bool) -> StepStatus:
        if compensation:
            return StepStatus.RETRYING  # compensations retry every failure until they succeed
        if isinstance(exc, errors.RetryableError):
            return StepStatus.RETRYING
        if self.engine.is_completable(exc):
            return StepStatus.FAILED
        return StepStatus.ERROR

    async def _invoke(
        self, call: _Call, args: tuple[Any, ...], kwargs: dict[str, Any], timeout: float | None
    ) -> Any:
        engine, defn, info = self.engine, call.defn, call.info
        if self.slot is not None:
            await self.slot.acquire()  # given back while the workflow only waited
        self.activities += 1
        info_token = activity_mod.enter(info)
        wf_token = context.suspend_workflow_context()
        try:
            slot = engine.queue_slot(defn.queue, call.priority)
            if slot is None:
                if not self._may_begin():
                    await self._before_attempt()
                return await self._attempt(defn, args, kwargs, timeout)
            async with slot:  # entered before the attempt begins
                if not self._may_begin():
                    await self._before_attempt()
                return await self._attempt(defn, args, kwargs, timeout)
        finally:
            context.leave(wf_token)
            activity_mod.leave(info_token)
            self.activities -= 1
            if self.activities == 0 and self.waiting and self.slot is not None:
                self.slot.release()  # the last activity ended while branches wait

    def _may_begin(self) -> bool:
        """Whether an attempt may begin now, after its waits for slots: the run still acts
        (a sibling branch may have ended, unloaded or doomed it meanwhile) and its lease is
        known to hold."""
        return (
            not (self.lease_lost or self.stopped or self.unloading or self.finishing)
            and self.doomed is None
            and self.engine.clock.now() < self.act_until
        )

    async def _before_attempt(self) -> None:
        """Stop the attempt as the run's state says, or renew the lease for it; what stops it
        is not the activity's error (``_NotBegun``)."""
        try:
            self._check_may_act()
            await self.confirm_lease()
        except Exception as exc:
            raise _NotBegun(exc) from exc

    def _attempt(
        self,
        defn: ActivityDef,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        timeout: float | None,
    ) -> Awaitable[Any]:
        """Begin one attempt (a sync activity starts on its thread now): what to await."""
        engine = self.engine
        if defn.is_async:
            work: Awaitable[Any] = defn.fn(*args, **kwargs)
        else:
            call = functools.partial(
                contextvars.copy_context().run, _sync_contained, defn, *args, **kwargs
            )
            work = asyncio.get_running_loop().run_in_executor(engine.thread_pool, call)
        cut = deadlines.cut_after(self, defn)
        if cut is not None:
            return deadlines.bounded(_contained(work, defn.name), timeout, cut, engine, defn.name)
        if timeout is None:
            return _contained(work, defn.name)
        return _with_timeout(_contained(work, defn.name), timeout, engine, defn.name)


class _NotBegun(Exception):
    """An attempt was stopped before it began (``reason``: the run ended, was doomed, or was
    taken over by another process, or renewing its lease failed)."""

    def __init__(self, reason: Exception) -> None:
        super().__init__(str(reason))
        self.reason = reason


def _next_attempt(info: activity_mod.ActivityInfo) -> activity_mod.ActivityInfo:
    """``info`` for the call's next attempt (built directly: ``dataclasses.replace`` costs
    several times more, on every activity call)."""
    return activity_mod.ActivityInfo(
        workflow_key=info.workflow_key,
        run_id=info.run_id,
        activity_name=info.activity_name,
        call_id=info.call_id,
        sequence=info.sequence,
        attempt=info.attempt + 1,
        idempotency_key=info.idempotency_key,
        is_compensation=info.is_compensation,
    )


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
    finished, result = await finish_within(work, timeout, engine.clock)
    if finished:
        return result
    raise errors.ActivityTimeout(f"activity {name!r} did not finish within {timeout}s")


def _round_so_far(previous: StepRecord | None) -> int:
    """Attempts of the current round made before the replay reached the call: recorded with
    a RETRYING step (between two attempts); none after a suspension (ERROR: a new round)."""
    if previous is None or previous.status is not StepStatus.RETRYING:
        return 0
    return serialization.round_of(previous.error)
