"""Sagaway: durable sagas for Python, embedded on SQLite, scalable on PostgreSQL.

Every public name below is imported on first use (PEP 562), so ``import sagaway`` (and every
``sagaway`` command, which imports it) loads none of the engine until a name is used; type
checkers read the explicit imports under ``TYPE_CHECKING``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sagaway import codecs
    from sagaway._cancel_log import CancelRequestDescription
    from sagaway._engine.audit import AuditEntry
    from sagaway._engine.forking import ForkPlan
    from sagaway._engine.replaying import ReplayReport
    from sagaway.activity import ActivityInfo, activity_info
    from sagaway.batches import BatchAction, BatchItem, BatchOutcome, BatchReport, WorkflowFilter
    from sagaway.errors import (
        ActivityTimeout,
        AlreadyRegistered,
        Cancelled,
        CompletableError,
        EngineUnavailable,
        ForkRefused,
        IdempotencyConflict,
        IncompletableError,
        LeaseLost,
        ManagerStateError,
        NonDeterminismError,
        NotRegistered,
        PayloadError,
        PayloadKeyError,
        RetriesExhausted,
        RetryableError,
        SagawayError,
        ScheduleNotFound,
        SignalTimeout,
        UpdateRejected,
        WorkflowAlreadyExists,
        WorkflowCancelled,
        WorkflowNotEnded,
        WorkflowNotFound,
    )
    from sagaway.manager import Manager, ManagerState
    from sagaway.patching import deprecate_patch, patched
    from sagaway.registry import Queue
    from sagaway.retry import RetryPolicy
    from sagaway.saga import Saga
    from sagaway.search import AttributeValue, set_search_attributes
    from sagaway.serialization import DefaultErrorMarshaler, ErrorMarshaler
    from sagaway.states import ErrorKind, OnConflict, StepKind, StepStatus, WorkflowStatus
    from sagaway.streams import EventNotSet, OutputItem, set_event, write_stream
    from sagaway.sync import SyncClient, SyncWorkflowHandle
    from sagaway.updates import Update, UpdateResult
    from sagaway.workflow import (
        SignalDescription,
        StepDescription,
        WorkflowDescription,
        WorkflowHandle,
    )

_WHERE: dict[str, str] = {
    "ActivityInfo": "sagaway.activity",
    "ActivityTimeout": "sagaway.errors",
    "AlreadyRegistered": "sagaway.errors",
    "AttributeValue": "sagaway.search",
    "AuditEntry": "sagaway._engine.audit",
    "BatchAction": "sagaway.batches",
    "BatchItem": "sagaway.batches",
    "BatchOutcome": "sagaway.batches",
    "BatchReport": "sagaway.batches",
    "CancelRequestDescription": "sagaway._cancel_log",
    "Cancelled": "sagaway.errors",
    "CompletableError": "sagaway.errors",
    "DefaultErrorMarshaler": "sagaway.serialization",
    "EngineUnavailable": "sagaway.errors",
    "ErrorKind": "sagaway.states",
    "ErrorMarshaler": "sagaway.serialization",
    "EventNotSet": "sagaway.streams",
    "ForkPlan": "sagaway._engine.forking",
    "ForkRefused": "sagaway.errors",
    "IdempotencyConflict": "sagaway.errors",
    "IncompletableError": "sagaway.errors",
    "LeaseLost": "sagaway.errors",
    "Manager": "sagaway.manager",
    "ManagerState": "sagaway.manager",
    "ManagerStateError": "sagaway.errors",
    "NonDeterminismError": "sagaway.errors",
    "NotRegistered": "sagaway.errors",
    "OnConflict": "sagaway.states",
    "OutputItem": "sagaway.streams",
    "PayloadError": "sagaway.errors",
    "PayloadKeyError": "sagaway.errors",
    "Queue": "sagaway.registry",
    "ReplayReport": "sagaway._engine.replaying",
    "RetriesExhausted": "sagaway.errors",
    "RetryPolicy": "sagaway.retry",
    "RetryableError": "sagaway.errors",
    "Saga": "sagaway.saga",
    "SagawayError": "sagaway.errors",
    "ScheduleNotFound": "sagaway.errors",
    "SignalDescription": "sagaway.workflow",
    "SignalTimeout": "sagaway.errors",
    "StepDescription": "sagaway.workflow",
    "StepKind": "sagaway.states",
    "StepStatus": "sagaway.states",
    "SyncClient": "sagaway.sync",
    "SyncWorkflowHandle": "sagaway.sync",
    "Update": "sagaway.updates",
    "UpdateRejected": "sagaway.errors",
    "UpdateResult": "sagaway.updates",
    "WorkflowAlreadyExists": "sagaway.errors",
    "WorkflowCancelled": "sagaway.errors",
    "WorkflowDescription": "sagaway.workflow",
    "WorkflowFilter": "sagaway.batches",
    "WorkflowHandle": "sagaway.workflow",
    "WorkflowNotEnded": "sagaway.errors",
    "WorkflowNotFound": "sagaway.errors",
    "WorkflowStatus": "sagaway.states",
    "activity_info": "sagaway.activity",
    "codecs": "sagaway.codecs",
    "deprecate_patch": "sagaway.patching",
    "patched": "sagaway.patching",
    "set_event": "sagaway.streams",
    "set_search_attributes": "sagaway.search",
    "write_stream": "sagaway.streams",
}
"""Public name -> the module that defines it (``codecs``: the module itself)."""

__version__ = "0.1.0"

__all__ = [
    "ActivityInfo",
    "ActivityTimeout",
    "AlreadyRegistered",
    "AttributeValue",
    "AuditEntry",
    "BatchAction",
    "BatchItem",
    "BatchOutcome",
    "BatchReport",
    "CancelRequestDescription",
    "Cancelled",
    "CompletableError",
    "DefaultErrorMarshaler",
    "EngineUnavailable",
    "ErrorKind",
    "ErrorMarshaler",
    "EventNotSet",
    "ForkPlan",
    "ForkRefused",
    "IdempotencyConflict",
    "IncompletableError",
    "LeaseLost",
    "Manager",
    "ManagerState",
    "ManagerStateError",
    "NonDeterminismError",
    "NotRegistered",
    "OnConflict",
    "OutputItem",
    "PayloadError",
    "PayloadKeyError",
    "Queue",
    "ReplayReport",
    "RetriesExhausted",
    "RetryPolicy",
    "RetryableError",
    "Saga",
    "SagawayError",
    "ScheduleNotFound",
    "SignalDescription",
    "SignalTimeout",
    "StepDescription",
    "StepKind",
    "StepStatus",
    "SyncClient",
    "SyncWorkflowHandle",
    "Update",
    "UpdateRejected",
    "UpdateResult",
    "WorkflowAlreadyExists",
    "WorkflowCancelled",
    "WorkflowDescription",
    "WorkflowFilter",
    "WorkflowHandle",
    "WorkflowNotEnded",
    "WorkflowNotFound",
    "WorkflowStatus",
    "__version__",
    "activity_info",
    "codecs",
    "deprecate_patch",
    "patched",
    "set_event",
    "set_search_attributes",
    "write_stream",
]


if not TYPE_CHECKING:  # hidden from type checkers: an unknown name stays an error for them

    def __getattr__(name: str) -> object:
        module = _WHERE.get(name)
        if module is None:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        loaded = importlib.import_module(module)
        value = loaded if module == f"{__name__}.{name}" else getattr(loaded, name)
        globals()[name] = value  # found directly from now on
        return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
