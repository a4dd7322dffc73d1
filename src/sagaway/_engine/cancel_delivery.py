"""Delivering a cancellation to a running execution (a cancel request, or its deadline passed).

Cooperative (see ``execution``): the request is delivered once, as ``Cancelled`` raised by the
next durable call with no recorded outcome, which records the cancellation as its outcome so
every replay raises it at the same call. ``ExecutionBase`` inherits this part of its state.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from sagaway import errors
from sagaway._engine import context
from sagaway._engine.cancellation import CANCEL_TYPE, is_cancel_step
from sagaway.states import ErrorKind, StepKind, StepStatus
from sagaway.store.records import StepRecord, WorkflowRecord

if TYPE_CHECKING:
    from sagaway._engine.engine import Engine


class CancelDelivery:
    """The cancellation state of an execution and the calls that deliver it."""

    # Given by ``ExecutionBase``.
    engine: Engine
    record: WorkflowRecord
    lease_lost: bool
    stopped: bool
    unloading: bool
    finishing: bool

    if TYPE_CHECKING:

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

    def _init_cancellation(self, record: WorkflowRecord, steps: list[StepRecord]) -> None:
        self.cancel_reason: str | None = record.cancel_reason
        """A cancel request this run knows of (see ``deliver_cancel``)."""
        self.cancel_delivered = any(is_cancel_step(step) for step in steps)
        """``Cancelled`` was raised (or is recorded as raised): activities run normally now."""
        self._backoffs: set[asyncio.Task[Any]] = set()
        """Branches sleeping before an activity's next attempt (a cancel interrupts them)."""
        self.open_sagas: list[Any] = []
        """``Saga`` objects of the workflow not used as ``async with`` blocks (hand-written):
        a cancellation delivered at the workflow's end runs their pending compensations."""
        self._interrupted: set[asyncio.Task[Any]] = set()
        self.pause_delivered = False
        """Paused (``deliver_pause``): the unwinding is a pause, not a wait's unload."""

    def deliver_cancel(self, reason: str) -> None:
        """A cancel request arrived: the next durable call raises ``Cancelled``; waits in the
        worker (timers, signals, children, retry backoffs) look again now."""
        if self.cancel_reason is None:
            self.cancel_reason = reason
        for task in self._backoffs - self._interrupted:
            self._interrupted.add(task)
            task.cancel()
        self._note_dropped()

    def deliver_pause(self) -> None:
        """The run was paused (``pausing``): it unwinds before its next durable call, as a wait
        unloads it (``Unload``), and the executor then writes what finished and gives its lease
        up. Nothing to do once its end is being written."""
        if self.finishing or self.stopped or self.unloading:
            return
        self.pause_delivered = True
        self.unloading = True
        self._note_dropped()  # waits in the worker look again, and unwind

    def pending_cancel(self, *, always: bool = False) -> str | None:
        """Why the run is to be cancelled at its next durable call; None if it is not.

        A new activity or child start sees a cancellation once (code that catches it may go
        on to clean up); ``always`` (a wait: timer, signal, child's end; an activity that
        failed before) sees it every time: a cancelled workflow waits no more and retries no
        failed step, so every branch blocked in a wait unwinds.
        """
        if self.cancel_delivered and not always:
            return None
        if self.cancel_reason is not None:
            return self.cancel_reason
        deadline = self.record.deadline_at
        if deadline is not None and self.engine.clock.now() >= deadline:
            return f"its deadline passed ({deadline - self.record.created_at:g}s after it started)"
        return None

    def until_cancel(self, seconds: float, *, always: bool = False) -> float:
        """``seconds``, cut short at the deadline while a cancellation may still come."""
        deadline = self.record.deadline_at
        if deadline is None or (self.cancel_delivered and not always):
            return seconds
        return max(min(seconds, deadline - self.engine.clock.now()), 0.0)

    async def _cancel_here(
        self,
        call_id: str,
        kind: StepKind,
        name: str,
        started_at: float,
        *,
        always: bool = False,
        detail: str = "",
    ) -> None:
        """Deliver a pending cancellation (``always``: see ``pending_cancel``) at this durable
        call, which has no recorded outcome: record the cancellation as its outcome (written
        with the next durable action, as an activity's is; ``detail`` added to the recorded
        message) and raise ``Cancelled``. Returns if there is none."""
        reason = self.pending_cancel(always=always)
        if reason is None:
            return
        self.cancel_delivered = True
        ended_at = self.completion_time()
        message = f"{reason}; {detail}" if detail else reason
        error = errors.error_record(ErrorKind.CANCELLED, CANCEL_TYPE, message)
        step = self._step(
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
        await self._record(step, defer=True)
        raise errors.Cancelled(message)

    def cancelled_by_request(self, exc: BaseException) -> bool:
        """Whether ``exc`` is the delivered cancellation (not the loss of the run)."""
        return (
            isinstance(exc, errors.Cancelled)
            and self.cancel_delivered
            and not (self.lease_lost or self.stopped or self.unloading or self.finishing)
        )
