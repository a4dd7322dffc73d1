"""State-transition events published on the Channel (frozen dataclasses, no behaviour)."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from sagaway.states import WorkflowStatus

if TYPE_CHECKING:
    from sagaway.store.records import WorkflowRecord


@dataclasses.dataclass(frozen=True, slots=True)
class WorkflowStarted:
    run_id: str
    key: str
    name: str


@dataclasses.dataclass(frozen=True, slots=True)
class WorkflowSuspended:
    run_id: str
    key: str
    error: str


@dataclasses.dataclass(frozen=True, slots=True)
class WorkflowEnded:
    """COMPLETED, FAILED, CANCELLED or TERMINATED."""

    run_id: str
    key: str
    status: WorkflowStatus
    record: WorkflowRecord | None = None
    """The ended execution as written, when the writer knows it (saves waiters a read)."""


@dataclasses.dataclass(frozen=True, slots=True)
class WorkflowWaiting:
    """Unloaded to wait for a signal, a timer or a child workflow."""

    run_id: str
    key: str


@dataclasses.dataclass(frozen=True, slots=True)
class SignalSent:
    run_id: str
    key: str
    name: str


@dataclasses.dataclass(frozen=True, slots=True)
class WorkflowChanged:
    """Another process changed this execution (it may have ended): waiters re-read it."""

    run_id: str


Event = (
    WorkflowStarted
    | WorkflowSuspended
    | WorkflowEnded
    | WorkflowWaiting
    | WorkflowChanged
    | SignalSent
)
