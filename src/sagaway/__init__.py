"""Sagaway: durable sagas for Python, embedded on SQLite, scalable on PostgreSQL."""

from __future__ import annotations

from sagaway import codecs
from sagaway._cancel_log import CancelRequestDescription
from sagaway._engine.audit import AuditEntry
from sagaway._engine.forking import ForkPlan
from sagaway._engine.replaying import ReplayReport
from sagaway.activity import ActivityInfo, activity_info
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
    "AttributeValue",
    "AuditEntry",
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
    "WorkflowAlreadyExists",
    "WorkflowCancelled",
    "WorkflowDescription",
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
