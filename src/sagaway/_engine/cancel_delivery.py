"""Delivering a cancellation to a running execution (a cancel request, or its deadline passed).

Cooperative (see ``execution``): the request is delivered once, as ``Cancelled`` raised by the
next durable call with no recorded outcome, which records the cancellation as its outcome so
every replay raises it at the same call. Each execution holds its ``CancelDelivery``
(``execution.cancels``).
"""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

from sagaway import errors
from sagaway._engine import context
from sagaway._engine.cancellation import CANCEL_TYPE, is_cancel_step
from sagaway.clock import Clock
from sagaway.states import ErrorKind, StepKind, StepStatus
from sagaway.store.records import StepRecord, WorkflowRecord


class _Engine(Protocol):
    @property
    def clock(self) -> Clock: ...


class Delivering(Protocol):
    """What a ``CancelDelivery`` reads and calls of the execution that holds it
    (``execution.ExecutionBase``; a protocol, so the two modules import one way only)."""

    record: WorkflowRecord
    lease_lost: bool
    stopped: bool
    unloading: bool
    finishing: bool

    @property
    def engine(self) -> _Engine: ...

    def completion_time(self) -> float: ...

    def _note_dropped(self) -> None: ...

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
    ) -> StepRecord: ...

    async def _record(self, step: StepRecord, *, defer: bool = False) -> None: ...


class CancelDelivery:
    """The cancellation state of one execution and the calls that deliver it."""

    def __init__(self, execution: Delivering, steps: list[StepRecord]) -> None:
        self._execution = execution
        self.reason: str | None = execution.record.cancel_reason
        """A cancel request this run knows of (see ``deliver``)."""
        self.delivered = any(is_cancel_step(step) for step in steps)
        """``Cancelled`` was raised (or is recorded as raised): activities run normally now."""
        self.backoffs: set[asyncio.Task[Any]] = set()
        """Branches sleeping before an activity's next attempt (a cancel interrupts them)."""
        self.interrupted: set[asyncio.Task[Any]] = set()
        """Those of ``backoffs`` a cancel interrupted."""
        self.open_sagas: list[Any] = []
        """``Saga`` objects of the workflow not used as ``async with`` blocks (hand-written):
        a cancellation delivered at the workflow's end runs their pending compensations."""
        self.pause_delivered = False
        """Paused (``deliver_pause``): the unwinding is a pause, not a wait's unload."""

    def deliver(self, reason: str) -> None:
        """A cancel request arrived: the next durable call raises ``Cancelled``; waits in the
        worker (timers, signals, children, retry backoffs) look again now."""
        if self.reason is None:
            self.reason = reason
        for task in self.backoffs - self.interrupted:
            self.interrupted.add(task)
            task.cancel()
        self._execution._note_dropped()

    def deliver_pause(self) -> None:
        """The run was paused (``pausing``): it unwinds before its next durable call, as a wait
        unloads it (``Unload``), and the executor then writes what finished and gives its lease
        up. Nothing to do once its end is being written."""
        execution = self._execution
        if execution.finishing or execution.stopped or execution.unloading:
            return
        self.pause_delivered = True
        execution.unloading = True
        execution._note_dropped()  # waits in the worker look again, and unwind

    def pending(self, *, always: bool = False) -> str | None:
        """Why the run is to be cancelled at its next durable call; None if it is not.

        A new activity or child start sees a cancellation once (code that catches it may go
        on to clean up); ``always`` (a wait: timer, signal, child's end; an activity that
        failed before) sees it every time: a cancelled workflow waits no more and retries no
        failed step, so every branch blocked in a wait unwinds.
        """
        if self.delivered and not always:
            return None
        if self.reason is not None:
            return self.reason
        record = self._execution.record
        deadline = record.deadline_at
        if deadline is not None and self._execution.engine.clock.now() >= deadline:
            return f"its deadline passed ({deadline - record.created_at:g}s after it started)"
        return None

    def until(self, seconds: float, *, always: bool = False) -> float:
        """``seconds``, cut short at the deadline while a cancellation may still come."""
        deadline = self._execution.record.deadline_at
        if deadline is None or (self.delivered and not always):
            return seconds
        return max(min(seconds, deadline - self._execution.engine.clock.now()), 0.0)

    async def here(
        self,
        call_id: str,
        kind: StepKind,
        name: str,
        started_at: float,
        *,
        always: bool = False,
        detail: str = "",
    ) -> None:
        """Deliver a pending cancellation (``always``: see ``pending``) at this durable call,
        which has no recorded outcome: record the cancellation as its outcome (written with
        the next durable action, as an activity's is; ``detail`` added to the recorded
        message) and raise ``Cancelled``. Returns if there is none."""
        reason = self.pending(always=always)
        if reason is None:
            return
        self.delivered = True
        execution = self._execution
        ended_at = execution.completion_time()
        message = f"{reason}; {detail}" if detail else reason
        error = errors.error_record(ErrorKind.CANCELLED, CANCEL_TYPE, message)
        step = execution._step(
            call_id,
            kind,
            name,
            StepStatus.FAILED,
            error=error,
            started_at=started_at,
            ended_at=ended_at,
            attempts=0,
        )
        context.note_completion(ended_at)
        await execution._record(step, defer=True)
        raise errors.Cancelled(message)

    def by_request(self, exc: BaseException) -> bool:
        """Whether ``exc`` is the delivered cancellation (not the loss of the run)."""
        execution = self._execution
        return (
            isinstance(exc, errors.Cancelled)
            and self.delivered
            and not (
                execution.lease_lost
                or execution.stopped
                or execution.unloading
                or execution.finishing
            )
        )
