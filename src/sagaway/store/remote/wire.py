"""Python values to and from the Engine Server's protocol messages (``sagaway.v1``), by rule.

A field has the name of the record field or verb argument it carries; a value's Python type
(from the records' and the Store's annotations) says how it is read back: a record from its
message, an enum from its name, a collection from a repeated field, a fixed tuple from a
message's fields in order, None from an absent optional field. Shared by the client
(``store/remote``) and the server (``sagaway.server``).

Two rules are not by name: a field called ``limit`` is clamped to int32 (asking for more than
the wire holds asks for everything), and an audit note travels as the client writes it
(``audit_note``: the server, not the client, says who acted).
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import types
import typing
from collections.abc import Callable, Collection, Sequence
from typing import Any, TypeVar

from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message

from sagaway.states import WorkflowStatus
from sagaway.store.records import AuditNote
from sagaway.v1 import engine_pb2 as pb

PROTOCOL_VERSION = 1
"""The protocol version this code speaks (``HelloRequest.protocol_version``)."""

R = TypeVar("R")
_INT32 = 2**31 - 1
CLAMPED = frozenset({"limit"})
"""Fields clamped to 0..2**31-1 on the way out."""
_SEQUENCES = {list, Collection, Sequence}


# ----------------------------------------------------------------------------- reading


def optional_of(tp: Any) -> Any:
    """``X`` for ``X | None``; None for a type that cannot be None."""
    if typing.get_origin(tp) not in (typing.Union, types.UnionType):
        return None
    args = typing.get_args(tp)
    rest = [a for a in args if a is not type(None)]
    return rest[0] if len(rest) == 1 and len(args) == 2 else None


def value_of(tp: Any, message: Any, name: str) -> Any:
    """The field ``name`` of ``message`` as the Python type ``tp`` (None: an absent optional)."""
    optional, convert = _field_reader(tp)
    presence = optional and message.DESCRIPTOR.fields_by_name[name].has_presence
    return _read_field(message, name, presence, convert)


@functools.cache
def _field_reader(tp: Any) -> tuple[bool, Callable[[Any], Any]]:
    """Whether a value of ``tp`` may be None, and the reader of its other values."""
    inner = optional_of(tp)
    return inner is not None, reader(tp if inner is None else inner)


def _read_field(message: Any, name: str, presence: bool, convert: Callable[[Any], Any]) -> Any:
    if presence and not message.HasField(name):
        return None
    return convert(getattr(message, name))


@functools.cache
def _only_field(descriptor: Descriptor, tp: Any) -> str | None:
    """The one field of a message that carries a whole value of ``tp`` (a reply such as
    ``Done``, a map's ``StepList``); None when the message itself is the value."""
    if len(descriptor.fields) != 1:
        return None
    name: str = descriptor.fields[0].name
    if dataclasses.is_dataclass(tp) and name in {f.name for f in dataclasses.fields(tp)}:
        return None
    return name


def read(tp: Any, message: Any) -> Any:
    """A reply (or a map's message value) as the Python type ``tp``."""
    if not message.DESCRIPTOR.fields:
        return None
    name = _only_field(message.DESCRIPTOR, tp)
    return reader(tp)(message) if name is None else value_of(tp, message, name)


@functools.cache
def reader(tp: Any) -> Callable[[Any], Any]:
    """How a raw protobuf value becomes the Python type ``tp``."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return functools.partial(from_message, tp)
    if tp is WorkflowStatus:
        return workflow_status
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return tp
    if origin in _SEQUENCES or origin in (set, frozenset):
        each, make = reader(args[0]), set if origin is set else frozenset
        if origin in _SEQUENCES:
            return lambda raw: [each(x) for x in raw]
        return lambda raw: make(each(x) for x in raw)
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        item = reader(args[0])
        return lambda raw: tuple(item(x) for x in raw)
    if origin is tuple:
        return lambda raw: tuple(
            _read_field(raw, f.name, presence and f.has_presence, convert)
            for (presence, convert), f in zip(
                map(_field_reader, args), raw.DESCRIPTOR.fields, strict=True
            )
        )
    if origin is dict:
        key, value = reader(args[0]), args[1]
        return lambda raw: {
            key(k): read(value, v) if isinstance(v, Message) else reader(value)(v)
            for k, v in raw.items()
        }
    if tp in (int, float, str, bool):
        return tp  # type: ignore[no-any-return]
    raise TypeError(f"no wire form for {tp!r}")


@functools.cache
def _plan(cls: type[Any], descriptor: Descriptor) -> list[tuple[str, bool, Callable[[Any], Any]]]:
    """For each field of ``cls`` the message has: its name, whether it may be absent, its
    reader (fields the message lacks keep their defaults)."""
    hints = typing.get_type_hints(cls)
    plan = []
    for field in dataclasses.fields(cls):
        if field.name not in descriptor.fields_by_name:
            continue
        tp = hints[field.name]
        inner = optional_of(tp)
        presence = inner is not None and descriptor.fields_by_name[field.name].has_presence
        plan.append((field.name, presence, reader(inner if inner is not None else tp)))
    return plan


def from_message(cls: type[R], message: Any) -> R:
    """The record ``cls`` from ``message``; absent optional fields become None.

    Malformed input (an unknown status, a missing required field) raises ValueError.
    """
    values: dict[str, Any] = {}
    for name, presence, convert in _plan(cls, message.DESCRIPTOR):  # type: ignore[arg-type]
        if presence and not message.HasField(name):
            values[name] = None
        else:
            values[name] = convert(getattr(message, name))
    return cls(**values)


# ----------------------------------------------------------------------------- writing


def _plain(value: Any) -> Any:
    return value.value if isinstance(value, enum.Enum) else value


def put(message: Any, name: str, value: Any) -> None:
    """Set the field ``name`` of ``message`` from a Python value (None: left absent)."""
    if value is not None:
        _setter(message.DESCRIPTOR, name)(message, value)


Setter = Callable[[Any, Any], None]


@functools.cache
def _setter(descriptor: Descriptor, name: str) -> Setter:
    """How a value (never None) goes into the field ``name`` of a message of ``descriptor``."""
    field: FieldDescriptor = descriptor.fields_by_name[name]
    if field.message_type is not None and field.message_type.GetOptions().map_entry:
        nested = field.message_type.fields_by_name["value"].message_type is not None
        return functools.partial(_put_map, name, nested)
    if field.is_repeated and field.message_type is not None:
        return functools.partial(_put_messages, name)
    if field.is_repeated:
        return functools.partial(_put_values, name)
    if field.message_type is not None:
        return functools.partial(_put_message, name)
    if name in CLAMPED:
        return lambda message, value: setattr(message, name, max(0, min(int(value), _INT32)))
    return lambda message, value: setattr(message, name, _plain(value))


def _put_map(name: str, nested: bool, message: Any, value: Any) -> None:
    entries = getattr(message, name)
    for key, item in value.items():
        if nested:
            fill(entries[_plain(key)], item)
        else:
            entries[_plain(key)] = _plain(item)


def _put_messages(name: str, message: Any, value: Any) -> None:
    items = getattr(message, name)
    for item in value:
        fill(items.add(), item)


def _put_values(name: str, message: Any, value: Any) -> None:
    plain = [_plain(item) for item in value]
    getattr(message, name).extend(sorted(plain) if isinstance(value, set | frozenset) else plain)


def _put_message(name: str, message: Any, value: Any) -> None:
    nested = getattr(message, name)
    nested.SetInParent()
    fill(nested, value)


_SCALAR, _ENUM, _OTHER = 0, 1, 2


@functools.cache
def _record_setters(cls: type[Any], descriptor: Descriptor) -> tuple[tuple[str, int, Setter], ...]:
    """The fields of record ``cls`` a message of ``descriptor`` has: each with how it is set (a
    plain scalar, an enum's value, else its setter), so a record's many scalars cost little."""
    hints = typing.get_type_hints(cls)
    plan = []
    for f in dataclasses.fields(cls):
        field = descriptor.fields_by_name.get(f.name)
        if field is None:
            continue
        tp = optional_of(hints[f.name]) or hints[f.name]
        scalar = field.message_type is None and not field.is_repeated and f.name not in CLAMPED
        if scalar and isinstance(tp, type) and issubclass(tp, enum.Enum):
            kind = _ENUM
        else:
            kind = _SCALAR if scalar else _OTHER
        plan.append((f.name, kind, _setter(descriptor, f.name)))
    return tuple(plan)


def fill(message: Any, value: Any) -> Any:
    """Fill ``message`` from ``value``: a record by field names, a tuple by field order, any
    other value into the message's one field (``read`` in reverse); returns ``message``."""
    if isinstance(value, AuditNote):
        value = audit_note(value)
    if isinstance(value, Message):
        message.CopyFrom(value)
        return message
    descriptor = message.DESCRIPTOR
    only = _only_field(descriptor, type(value))  # type: ignore[arg-type]
    if only is not None:
        put(message, only, value)
    elif dataclasses.is_dataclass(value):
        for name, kind, setter in _record_setters(type(value), descriptor):  # type: ignore[arg-type]
            item = getattr(value, name)
            if item is None:
                continue
            if kind == _SCALAR:
                setattr(message, name, item)
            elif kind == _ENUM:
                setattr(message, name, item.value)
            else:
                setter(message, item)
    elif isinstance(value, tuple):
        for field, item in zip(descriptor.fields, value, strict=True):
            put(message, field.name, item)
    elif value is not None:
        raise TypeError(f"no rule fills {descriptor.name} from {type(value).__name__}")
    return message


def workflow(record: Any) -> pb.WorkflowRecord:
    """A workflow record's message."""
    return fill(pb.WorkflowRecord(), record)  # type: ignore[no-any-return]


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
