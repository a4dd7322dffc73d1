"""State-transition events published on the Channel (frozen dataclasses, no behaviour)."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from sagaway.states import WorkflowStatus

if TYPE_CHECKING:
    from sagaway.store.records import WorkflowRecord


@dataclasses.dataclass(frozen=True, slots=True)
class RunEvent:
    """An event of the execution ``run_id`` under ``key`` (its kind is its class)."""

    run_id: str
    key: str


@dataclasses.dataclass(frozen=True, slots=True)
class WorkflowStarted(RunEvent):
    name: str


@dataclasses.dataclass(frozen=True, slots=True)
class WorkflowSuspended(RunEvent):
    error: str


@dataclasses.dataclass(frozen=True, slots=True)
class WorkflowEnded(RunEvent):
    """COMPLETED, FAILED, CANCELLED or TERMINATED."""

    status: WorkflowStatus
    record: WorkflowRecord | None = None
    """The ended execution as written, when the writer knows it (saves waiters a read)."""


@dataclasses.dataclass(frozen=True, slots=True)
class WorkflowWaiting(RunEvent):
    """Unloaded to wait for a signal, a timer or a child workflow."""


@dataclasses.dataclass(frozen=True, slots=True)
class SignalSent(RunEvent):
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
