"""Records to and from the Engine Server's protocol messages (``sagaway.v1``).

Field names are the same on both sides; optional fields are absent on the wire when the record
holds None. Shared by the client (``store/remote/client.py``) and the server (``sagaway.server``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection
from typing import Any, TypeVar

from google.protobuf.message import Message

from sagaway.states import StepKind, StepStatus, WorkflowStatus
from sagaway.store.records import (
    AttemptErrorRecord,
    AuditNote,
    AuditRecord,
    ForkPayloads,
    Lease,
    NewWorkflow,
    ScheduleRecord,
    SignalRecord,
    StepPayloads,
    StepRecord,
    WorkflowRecord,
)
from sagaway.v1 import engine_pb2 as pb

PROTOCOL_VERSION = 1
"""The protocol version this code speaks (``HelloRequest.protocol_version``)."""

R = TypeVar("R")
_ENUMS: dict[tuple[type[Any], str], type[Any]] = {
    (WorkflowRecord, "status"): WorkflowStatus,
    (StepRecord, "status"): StepStatus,
    (StepRecord, "kind"): StepKind,
}


def to_message(record: Any, message: Message) -> Any:
    """Fill ``message`` from the dataclass ``record`` (same field names); returns it."""
    for field in dataclasses.fields(record):
        value = getattr(record, field.name)
        if value is not None:
            setattr(message, field.name, value.value if hasattr(value, "value") else value)
    return message


def from_message(cls: type[R], message: Any) -> R:
    """The dataclass ``cls`` from ``message``; absent optional fields become None.

    Malformed input (an unknown status, a missing required field) raises ValueError.
    """
    values: dict[str, Any] = {}
    for field in dataclasses.fields(cls):  # type: ignore[arg-type]
        name = field.name
        descriptor = message.DESCRIPTOR.fields_by_name[name]
        if descriptor.has_presence and not message.HasField(name):
            values[name] = None
            continue
        value = getattr(message, name)
        enum = _ENUMS.get((cls, name))
        values[name] = enum(value) if enum is not None else value
    return cls(**values)


def workflow(record: WorkflowRecord) -> pb.WorkflowRecord:
    return to_message(record, pb.WorkflowRecord())  # type: ignore[no-any-return]


def step(record: StepRecord) -> pb.StepRecord:
    return to_message(record, pb.StepRecord())  # type: ignore[no-any-return]


def signal(record: SignalRecord) -> pb.SignalRecord:
    return to_message(record, pb.SignalRecord())  # type: ignore[no-any-return]


def lease(record: Lease) -> pb.Lease:
    return to_message(record, pb.Lease())  # type: ignore[no-any-return]


def new_workflow(record: NewWorkflow) -> pb.NewWorkflow:
    return to_message(record, pb.NewWorkflow())  # type: ignore[no-any-return]


def attempt_error(record: AttemptErrorRecord) -> pb.AttemptErrorRecord:
    return to_message(record, pb.AttemptErrorRecord())  # type: ignore[no-any-return]


def schedule(record: ScheduleRecord) -> pb.ScheduleRecord:
    return to_message(record, pb.ScheduleRecord())  # type: ignore[no-any-return]


def fork_payloads(record: ForkPayloads) -> pb.ForkPayloads:
    return pb.ForkPayloads(
        args=record.args, steps=[to_message(s, pb.StepPayloads()) for s in record.steps]
    )


def fork_payloads_of(request: Any) -> ForkPayloads | None:
    """The payloads of a ``ForkWorkflowRequest`` (None when it has none)."""
    if not request.HasField("payloads"):
        return None
    given = request.payloads
    steps = tuple(from_message(StepPayloads, s) for s in given.steps)
    return ForkPayloads(args=given.args, steps=steps)


def audit_note(note: AuditNote | None) -> pb.AuditNote | None:
    """An audit note as a client sends it: the server sets who acted, so the client's name for
    itself travels as the claim ``on_behalf_of`` (its caller's, if it has one)."""
    if note is None:
        return None
    return pb.AuditNote(
        entry_id=note.entry_id,
        action=note.action,
        on_behalf_of=note.on_behalf_of or note.actor,
        reason=note.reason,
        details=note.details,
    )


def audit_record(record: AuditRecord) -> pb.AuditRecord:
    return to_message(record, pb.AuditRecord())  # type: ignore[no-any-return]


def optional(message: Any, name: str) -> Any:
    """The value of an optional field, None when absent."""
    return getattr(message, name) if message.HasField(name) else None


def workflow_status(name: str) -> WorkflowStatus:
    """A status name from the wire (ValueError names the known ones)."""
    try:
        return WorkflowStatus(name)
    except ValueError:
        known = ", ".join(s.value for s in WorkflowStatus)
        raise ValueError(f"unknown workflow status {name!r}; use one of {known}") from None


def version_filter(versions: Collection[str | None] | None) -> dict[str, Any]:
    """The ``only_versions``, ``versions`` and ``unversioned`` fields of a claim (and of
    ``next_due``) for ``Store.claim_due(versions=...)``. Unset, they mean every version, which
    is what a client older than code versions sends."""
    if versions is None:
        return {}
    named = sorted(v for v in versions if v is not None)
    return {"only_versions": True, "versions": named, "unversioned": None in versions}


def versions_of(request: Any) -> frozenset[str | None] | None:
    """``version_filter`` read back (None: every version)."""
    if not request.only_versions:
        return None
    chosen: set[str | None] = set(request.versions)
    if request.unversioned:
        chosen.add(None)
    return frozenset(chosen)
