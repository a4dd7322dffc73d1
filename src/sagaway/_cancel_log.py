"""What became of each cancel request made to a workflow execution (``describe()``, ``sagaway
show``, the console): the log of requests (``Store.list_cancel_requests``) read beside the step
where the cancellation was delivered."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from sagaway import serialization
from sagaway._engine.cancellation import is_cancel_step
from sagaway.states import StepKind, WorkflowStatus
from sagaway.store.records import CancelRequestRecord, StepRecord, WorkflowRecord

_NOT_DELIVERED = {
    WorkflowStatus.FAILED: "it ended FAILED: a business error was being compensated, and a "
    "cancel does not interrupt compensations",
    WorkflowStatus.TERMINATED: "it was terminated",
}


@dataclasses.dataclass(frozen=True, slots=True)
class CancelRequestDescription:
    """A cancel request made to a workflow execution, and what became of it."""

    reason: str
    requested_at: float
    state: str
    """'delivered', 'pending' (accepted, not delivered yet), 'joined' (accepted while an
    earlier request was pending: one cancellation, delivered where that one was), 'refused'
    (the workflow had already ended) or 'not delivered' (it ended first: see ``why``)."""
    delivered_call: str | None = None
    """The call id where the cancellation was delivered."""
    delivered_where: str | None = None
    """What that call was: ``activity 'ship'``, ``cancel 'saga end'``, ``sleep 'sleep'``, ..."""
    delivered_at: float | None = None
    """When it was delivered."""
    why: str | None = None
    """Why it was refused or not delivered, or what a pending one waits for."""

    @property
    def accepted(self) -> bool:
        """Whether ``cancel()`` answered True."""
        return self.state != "refused"


def describe(
    record: WorkflowRecord, steps: Sequence[StepRecord], requests: Sequence[CancelRequestRecord]
) -> list[CancelRequestDescription]:
    """Each request of ``requests`` (in order) with its fate."""
    delivered = min(
        (s for s in steps if is_cancel_step(s)),
        key=lambda s: s.ended_at or 0.0,
        default=None,
    )
    described: list[CancelRequestDescription] = []
    first: CancelRequestDescription | None = None
    for request in requests:
        if not request.accepted:
            one = CancelRequestDescription(
                request.reason,
                request.requested_at,
                "refused",
                why="the workflow had already ended",
            )
        elif first is not None:
            one = dataclasses.replace(
                first,
                reason=request.reason,
                requested_at=request.requested_at,
                state="joined" if first.state == "delivered" else first.state,
                why=f"an earlier request ({first.reason!r}) was already accepted: one cancellation",
            )
        else:
            one = first = _first(record, delivered, request)
        described.append(one)
    return described


def _first(
    record: WorkflowRecord, step: StepRecord | None, request: CancelRequestRecord
) -> CancelRequestDescription:
    if step is not None:
        message = str((serialization.error_summary(step.error) or {}).get("message", ""))
        where = (
            step.name
            if step.kind is StepKind.CANCEL
            else f"{step.kind.value} {step.name.rsplit('.', 1)[-1]!r}"
        )
        return CancelRequestDescription(
            request.reason,
            request.requested_at,
            "delivered",
            delivered_call=step.call_id,
            delivered_where=where,
            delivered_at=step.ended_at,
            why=None if message.startswith(request.reason) else f"delivered as: {message}",
        )
    if not record.status.ended:
        return CancelRequestDescription(
            request.reason,
            request.requested_at,
            "pending",
            why="delivered at its next durable call or wait, the end of a saga block, or its end",
        )
    why = _NOT_DELIVERED.get(record.status, f"it ended {record.status.value} first")
    return CancelRequestDescription(request.reason, request.requested_at, "not delivered", why=why)
