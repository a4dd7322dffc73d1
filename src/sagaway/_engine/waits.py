"""Durable waits: timers, signals, children.

A wait that is all the workflow is doing commits WAITING and unloads the workflow (no task, no
lease); the wait's end makes it due and the Recovery Worker runs it again. A wait begun beside
other work waits in the worker, giving the slot back, and unloads when that work ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import Awaitable, Callable, Iterator
from typing import TYPE_CHECKING, Any, NoReturn

import pydantic
import pydantic_core

from sagaway import _sealed, errors, serialization
from sagaway._engine import context, keys
from sagaway._engine.execution import FINAL, WAIT_IN_PROCESS, ExecutionBase, Unload, engine_code
from sagaway._engine.flow import PLAIN, Flow
from sagaway.clock import wait_event_or_sleep
from sagaway.states import ErrorKind, StepKind, StepStatus, WorkflowStatus
from sagaway.store.records import SignalReceive, StepRecord, WorkflowRecord

if TYPE_CHECKING:
    from sagaway.registry import WorkflowDef


class WaitCalls(ExecutionBase):
    """The timers, signal receives and children of an execution."""

    @engine_code
    async def call_sleep(self, seconds: float, call_id: str) -> None:
        """A durable timer: the wake-up time is recorded, so a resumed workflow sleeps the rest.

        Long sleeps unload the workflow (WAITING, no worker task, no lease) and the Recovery
        Worker re-runs it when the time comes; short ones sleep in the worker.
        """
        self._check_usable()
        engine = self.engine
        previous = self._replayed(call_id, StepKind.SLEEP, "sleep")
        if self.replay_only:
            return  # a replay check goes on; nothing after an unexpired timer is recorded
        await self._before_durable_action()
        now = engine.clock.now()
        started_at = previous.started_at if previous is not None else now
        step: StepRecord | None = None
        if previous is not None and previous.result is not None:
            wake_at = float(previous.result)
        else:
            wake_at = now + seconds
        if wake_at > now:
            # A timer that has run out is over, cancelled or not: a replay returns it as well.
            await self.cancels.here(call_id, StepKind.SLEEP, "sleep", started_at, always=True)
        if previous is None or previous.result is None:
            step = self._step(
                call_id,
                StepKind.SLEEP,
                "sleep",
                StepStatus.COMPLETED,
                result=repr(wake_at),
                started_at=now,
                ended_at=wake_at,
            )
        remaining = wake_at - now
        if remaining >= WAIT_IN_PROCESS and self.inflight == 0:
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
                    await self.cancels.here(
                        call_id, StepKind.SLEEP, "sleep", started_at, always=True
                    )
                    if left >= WAIT_IN_PROCESS and self.inflight == 1:
                        break  # begun beside other work, which has ended: only this timer is left
                    self._inflight_dropped.clear()
                    await wait_event_or_sleep(
                        self._inflight_dropped, engine.clock, self.cancels.until(left, always=True)
                    )
            # Wait durably instead of holding a lease (and memory) until the timer fires.
            await self._before_durable_action()
            if self.inflight == 0:
                await self._wait(waiting_for="timer", next_run_at=wake_at, step=None)

    def _unloaded_until(self, end: float | None) -> NoReturn:
        """A wait's store call committed WAITING: unwind. If the wait has an end (its own
        timeout, the workflow's deadline), Recovery may have planned its next scan for later."""
        self.unloading = True
        if end is not None or self.record.deadline_at is not None:
            self.engine.wake_recovery()
        raise Unload()

    @engine_code
    async def call_receive(
        self,
        name: str,
        adapter: pydantic.TypeAdapter[Any],
        timeout: float | None,
        call_id: str,
        validate: Callable[[Any], str | None] | None = None,
    ) -> Any:
        """Receive the next signal ``name`` (durably waiting), decoded as ``adapter``;
        ``validate(value)``: None, or why it is rejected (an update's validator)."""
        self._check_usable()
        engine = self.engine
        previous = self._replayed(call_id, StepKind.SIGNAL, name)
        if previous is not None and previous.status is StepStatus.COMPLETED:
            context.note_completion(previous.ended_at or 0.0)
            return _decode_signal(adapter, previous.result)
        if previous is not None and previous.status is StepStatus.FAILED:
            message = serialization.error_summary(previous.error) or {}
            raise errors.SignalTimeout(str(message.get("message", f"no signal {name!r}")))
        now = engine.clock.now()
        started_at = previous.started_at if previous else now
        fresh_deadline = None if timeout is None else now + timeout
        deadline = previous.ended_at if previous is not None else fresh_deadline
        watcher = engine.channel.watch_signals(self.record.run_id)
        try:
            while True:
                # Every pending outcome is written before a wait may unload the workflow (an
                # unload gives the lease up: nothing could be written afterwards).
                await self._before_durable_action()
                await self.cancels.here(call_id, StepKind.SIGNAL, name, started_at, always=True)
                now = engine.clock.now()
                expired = deadline is not None and now >= deadline
                if not expired:
                    now = self.completion_time()  # a signal received now is recorded at ``now``
                unload = self.inflight == 0 and not expired
                payload = await self._take_signal(
                    name, adapter, call_id, started_at, deadline, unload, now, validate
                )
                if payload is not None:
                    self.recorded[call_id] = self._step(
                        call_id,
                        StepKind.SIGNAL,
                        name,
                        StepStatus.COMPLETED,
                        result=payload,
                        started_at=started_at,
                        ended_at=now,
                    )
                    context.note_completion(now)
                    return _decode_signal(adapter, payload)
                if expired:
                    await self._signal_timed_out(name, call_id, started_at, now)
                if unload:
                    self._unloaded_until(deadline)
                if self.inflight == 0:
                    continue  # the other work ended during the read: unload now, not at a poll
                await self._signal_beside(watcher, deadline, now)
        finally:
            engine.channel.unwatch_signals(self.record.run_id, watcher)

    async def _signal_beside(
        self, watcher: asyncio.Event, deadline: float | None, now: float
    ) -> None:
        """Another branch is busy: wait here, woken by a local send, a cancel or polling."""
        wait = self.cancels.until(self.engine.poll_interval, always=True)
        if deadline is not None:
            wait = min(wait, max(deadline - now, 0.0))
        with self._waiting_beside(watcher):
            if self.cancels.pending(always=True) is None:  # it may have come meanwhile
                await wait_event_or_sleep(watcher, self.engine.clock, wait)

    async def _take_signal(
        self,
        name: str,
        adapter: pydantic.TypeAdapter[Any],
        call_id: str,
        started_at: float,
        deadline: float | None,
        unload: bool,
        now: float,
        validate: Callable[[Any], str | None] | None = None,
    ) -> str | None:
        """The next well-formed signal ``name`` (that ``validate`` accepts), recorded as
        received; None if there is none (then, if ``unload``, the workflow was made WAITING)."""

        def accept(payload: str) -> str | None:
            try:
                value = _decode_signal(adapter, payload)
            except errors.PayloadKeyError:
                raise  # sealed beyond this process: it stays pending, the workflow suspends
            except errors.PayloadError as exc:
                return str(exc)
            return None if validate is None else validate(value)

        store = self.engine.store
        return await self._unload_guard(
            unload,
            store.receive_signal(
                SignalReceive(
                    run_id=self.record.run_id,
                    token=self.lease.token,
                    name=name,
                    call_id=call_id,
                    started_at=started_at,
                    deadline=deadline,
                    wait=unload,
                ),
                accept=accept,
                now=now,
            ),
            unloads=lambda found: found is None,
        )

    async def _signal_timed_out(
        self, name: str, call_id: str, started_at: float, now: float
    ) -> NoReturn:
        error = errors.SignalTimeout(f"no signal {name!r} arrived within {now - started_at:.1f}s")
        await self._record(
            self._step(
                call_id,
                StepKind.SIGNAL,
                name,
                StepStatus.FAILED,
                error=self._describe(error, ErrorKind.TIMEOUT),
                started_at=started_at,
                ended_at=now,
            )
        )
        raise error

    @engine_code
    async def call_update_answer(
        self, call_id: str, name: str, result: str | None, error: BaseException | None
    ) -> bool:
        """Record an update's answer as the step ``call_id`` (kind ``update``, ``name``): the
        handler's encoded ``result``, or its completable ``error``. A replay finds it recorded
        and writes nothing; False then (the answer was given before)."""
        self._check_usable()
        previous = self._replayed(call_id, StepKind.UPDATE, name)
        if previous is not None and previous.status in FINAL:
            context.note_completion(previous.ended_at or 0.0)
            return False
        if self.replay_only:
            return False
        await self._before_durable_action()
        now = self.completion_time()
        failed = error is not None
        await self._record(
            self._step(
                call_id,
                StepKind.UPDATE,
                name,
                StepStatus.FAILED if failed else StepStatus.COMPLETED,
                result=None if failed else result,
                error=None if error is None else self._describe(error, ErrorKind.FAILED),
                started_at=now,
                ended_at=now,
            )
        )
        context.note_completion(now)
        return True

    @contextlib.contextmanager
    def _waiting_beside(self, watcher: asyncio.Event) -> Iterator[None]:
        """Wait in the worker beside other work (see ``_waiting_here``); ``watcher`` is set
        too when that work ends, so the wait looks again and can unload if it is all that is
        left."""
        with self._waiting_here():
            watcher.clear()
            self._wakers.add(watcher)
            try:
                yield
            finally:
                self._wakers.discard(watcher)

    @engine_code
    async def call_child(
        self,
        defn: WorkflowDef,
        args_json: str,
        key: str | None,
        call_id: str,
        deadline: float | None = None,
        flow: Flow = PLAIN,
    ) -> str:
        """Start a child workflow once; returns its key (``deadline``: its own, in seconds;
        ``flow``: its priority and fairness, as the parent's unless its start gave them)."""
        self._check_usable()
        engine = self.engine
        previous = self._replayed(call_id, StepKind.CHILD, defn.name)
        if previous is not None and previous.status is StepStatus.COMPLETED:
            assert previous.result is not None
            child_key: str = serialization.load_json(previous.result, "child key")
            return child_key
        if key is not None and previous is None:
            keys.check_chosen_child_key(key, self.record)
        child_key = key or keys.derived_key(self.record, call_id)
        await self._before_durable_action()
        now = engine.clock.now()
        await self.cancels.here(call_id, StepKind.CHILD, defn.name, now)
        answers = (errors.IdempotencyConflict, errors.WorkflowAlreadyExists, ValueError)
        start = functools.partial(
            engine.start_child,
            defn,
            args_json,
            key=child_key,
            parent_key=self.key,
            deadline=deadline,
            flow=flow,
        )
        child = await self._store_call(start(), answers=answers)
        await self._record(
            self._step(
                call_id,
                StepKind.CHILD,
                defn.name,
                StepStatus.COMPLETED,
                result=serialization.encode_value(child_key, "child key"),
                started_at=now,
                ended_at=engine.clock.now(),
            )
        )
        if child.status.ended:
            # It attached to an execution that had ended: a purge may have deleted it since
            # (the step just recorded keeps it from now on). Gone, it is started anew, as any
            # start under a purged key is; there, it is attached to again.
            await self._store_call(start(), answers=answers)
        return child_key

    @engine_code
    async def call_child_result(self, defn: WorkflowDef, child_key: str, call_id: str) -> Any:
        """Wait durably for a child workflow's end; its result, or its error raised."""
        self._check_usable()
        engine = self.engine
        previous = self._replayed(call_id, StepKind.CHILD_RESULT, defn.name)
        if previous is not None and previous.status in FINAL:
            return self._replay_outcome(previous, defn.codec.decode_result)
        started_at = engine.clock.now()
        child = await self._child_end(defn, child_key, call_id, started_at)
        status = (
            StepStatus.COMPLETED if child.status is WorkflowStatus.COMPLETED else StepStatus.FAILED
        )
        error = child.error
        if child.status in (WorkflowStatus.CANCELLED, WorkflowStatus.TERMINATED):
            error = self._describe(
                errors.WorkflowCancelled(child_key, child.status.value, "child workflow"),
                ErrorKind.CANCELLED,
            )
        step = self._step(
            call_id,
            StepKind.CHILD_RESULT,
            defn.name,
            status,
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

    async def _child_end(
        self, defn: WorkflowDef, child_key: str, call_id: str, started_at: float
    ) -> WorkflowRecord:
        """The child's record once it has ended (the workflow unloads meanwhile if this wait
        is all it is doing). Cancelled meanwhile, the parent asks the child to cancel too, if
        it started it: a workflow it attached to under a shared key goes on for its owner."""
        engine = self.engine
        while True:
            await self._before_durable_action()  # as in call_receive: before a possible unload
            reason = self.cancels.pending(always=True)
            if reason is not None:
                child = await self._store_call(engine.store.get_workflow(child_key))
                if child is not None and child.parent_key == self.key:
                    with contextlib.suppress(errors.WorkflowNotFound):
                        await self._store_call(
                            engine.request_cancel(
                                child_key, f"its parent {self.key!r} was cancelled: {reason}"
                            ),
                            answers=(errors.WorkflowNotFound,),
                        )
                await self.cancels.here(
                    call_id, StepKind.CHILD_RESULT, defn.name, started_at, always=True
                )
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
                return child
            if unload:
                self._unloaded_until(None)
            if self.inflight == 0:
                # The other work ended during the read: its notice came before this wait
                # listened for one, so look again now (and unload), as call_receive does.
                continue
            # Begun beside other work, the wait stays here (the slot given back) until the
            # child ends or the other work does: then it looks again, and unloads if it is
            # all that is left (a child that never ends must not hold the lease forever).
            watcher = asyncio.Event()
            with self._waiting_beside(watcher):
                if self.cancels.pending(always=True) is not None:
                    continue  # one came during the read
                waits = [engine.wait_for_end(child.run_id, child_key, None), watcher.wait()]
                if self.record.deadline_at is not None:
                    waits.append(engine.clock.sleep(self.cancels.until(float("inf"), always=True)))
                await _first_of(*waits)


def _decode_signal(adapter: pydantic.TypeAdapter[Any], payload: str | None) -> Any:
    if _sealed.is_sealed(payload):
        # Not opened by this process (no codec, a key it lacks, or sealed for another place):
        # never handed to the workflow as the envelope (a ``receive(dict)`` would take it).
        assert payload is not None
        raise _sealed.sealed_error(payload, "signal payload")
    try:
        data = None if payload is None else pydantic_core.from_json(payload)
        return adapter.validate_python(data)
    except pydantic.ValidationError as exc:
        raise errors.PayloadError(
            f"signal payload does not fit {exc.title}:\n{serialization.explain(exc)}"
        ) from None
    except ValueError as exc:
        raise errors.PayloadError(f"signal payload is not JSON: {exc}") from None


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
