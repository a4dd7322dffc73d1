"""What every request must satisfy before it reaches the store: text a database can hold,
finite numbers, sane limits, payloads within the limit."""

from __future__ import annotations

import math
from typing import Any

import grpc
from google.protobuf.descriptor import FieldDescriptor

from sagaway.server.status import Refusal

_TEXT = FieldDescriptor.TYPE_STRING
_DOUBLE = FieldDescriptor.TYPE_DOUBLE
_INTS = (FieldDescriptor.TYPE_INT32, FieldDescriptor.TYPE_INT64)
_MESSAGE = FieldDescriptor.TYPE_MESSAGE
_PAYLOADS = frozenset({"args", "result", "error", "payload"})


def _bad(message: str) -> Refusal:
    return Refusal(grpc.StatusCode.INVALID_ARGUMENT, message)


def _check_value(field: FieldDescriptor, value: Any, where: str, limit: int) -> None:
    if field.type == _MESSAGE:
        check_message(value, limit, where)
    elif field.type == _TEXT:
        if "\x00" in value:
            raise _bad(f"{where} must not contain NUL characters")
        if field.name in _PAYLOADS and len(value) > limit:
            raise Refusal(
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                f"{where} is {len(value)} characters, over the payload limit of {limit}",
            )
    elif field.type == _DOUBLE and not math.isfinite(value):
        raise _bad(f"{where} must be a finite number, not {value}")
    elif field.type in _INTS and value < 0:
        raise _bad(f"{where} must not be negative")


def check_message(message: Any, limit: int, where: str = "") -> None:
    """Refuse ``message`` (INVALID_ARGUMENT, RESOURCE_EXHAUSTED) if any field is unfit."""
    for field, value in message.ListFields():
        name = f"{where}.{field.name}" if where else field.name
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            for key, item in value.items():
                _check_value(field.message_type.fields_by_name["key"], key, name, limit)
                _check_value(field.message_type.fields_by_name["value"], item, name, limit)
        elif field.is_repeated:
            for item in value:
                _check_value(field, item, name, limit)
        else:
            _check_value(field, value, name, limit)
