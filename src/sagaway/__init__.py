"""Sagaway: durable sagas for Python, embedded on SQLite, scalable on PostgreSQL."""

from __future__ import annotations

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
from sagaway.serialization import DefaultErrorMarshaler, ErrorMarshaler
from sagaway.states import ErrorKind, OnConflict, StepKind, StepStatus, WorkflowStatus
from sagaway.sync import SyncClient, SyncWorkflowHandle
from sagaway.updates import Update, UpdateResult
from sagaway.workflow import (
    SignalDescription,
    StepDescription,
    WorkflowDescription,
    WorkflowHandle,
)

__version__ = "0.1.0"

__all__ = [
    "ActivityInfo",
    "ActivityTimeout",
    "AlreadyRegistered",
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
]
