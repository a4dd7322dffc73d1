"""How a delivered cancellation is recorded: as the outcome of the durable call it was delivered
at (FAILED, error type ``sagaway.Cancelled``), so a replay raises it at the same call."""

from __future__ import annotations

from sagaway import serialization
from sagaway.states import StepStatus
from sagaway.store.records import StepRecord

CANCEL_TYPE = "sagaway.Cancelled"
"""Error type of a step whose outcome is a delivered cancellation (see ``CancelDelivery.here``)."""


def is_cancel_step(step: StepRecord) -> bool:
    """Whether ``step`` recorded the delivery of a cancellation."""
    if step.status is not StepStatus.FAILED or step.error is None or CANCEL_TYPE not in step.error:
        return False
    return (serialization.error_summary(step.error) or {}).get("type") == CANCEL_TYPE
