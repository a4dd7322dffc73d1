"""What every request must satisfy before it reaches the store: bytes that parse as the
request message (``WireGuard``), text a database can hold, finite numbers, sane limits,
payloads within the limit (``check_message``), and what some verbs ask more of their arguments
(``check_arguments``)."""

from __future__ import annotations

import dataclasses
import inspect
import math
from collections.abc import Callable, Mapping
from typing import Any

import grpc
import grpc.aio
from google.protobuf.descriptor import FieldDescriptor

from sagaway._engine import cron
from sagaway._engine.text_checks import check_name, check_plain
from sagaway.server.grpc_types import Continuation, Handler
from sagaway.server.status import Refusal
from sagaway.states import WorkflowStatus

_TEXT = FieldDescriptor.TYPE_STRING
_DOUBLE = FieldDescriptor.TYPE_DOUBLE
_INTS = (FieldDescriptor.TYPE_INT32, FieldDescriptor.TYPE_INT64)
_MESSAGE = FieldDescriptor.TYPE_MESSAGE
_PAYLOADS = frozenset({"args", "result", "error", "payload"})


ENVELOPE = 64 * 1024
"""Room for a message's other fields beside its payloads."""


def max_request_bytes(payload_limit: int) -> int:
    """The largest request a server with this payload limit takes: two payloads (a workflow's
    result and the step recording it) and their envelope."""
    return 2 * payload_limit + ENVELOPE


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


# ----------------------------------------------------------------------------- arguments

FINISHED = frozenset({WorkflowStatus.COMPLETED, WorkflowStatus.FAILED, WorkflowStatus.CANCELLED})
ENDED_BY_REQUEST = frozenset({WorkflowStatus.CANCELLED, WorkflowStatus.TERMINATED})


def _ending(allowed: frozenset[WorkflowStatus]) -> Callable[[dict[str, Any]], None]:
    """The status a call ends a workflow with must be one of ``allowed``."""

    def check(values: dict[str, Any]) -> None:
        status = values["status"]
        if status not in allowed:
            names = " or ".join(sorted(s.value for s in allowed))
            raise ValueError(f"status must be {names}, not {status.value}")

    return check


def text_of(value: str, what: str) -> str:
    """A queue limit's name or holder from the wire: a non-empty string (ValueError)."""
    if not value:
        raise ValueError(f"{what} must be a non-empty string")
    return value


def _schedule(values: dict[str, Any]) -> None:
    schedule = values["put"].schedule
    check_plain(schedule.id, "schedule id")
    check_name(schedule.workflow, "workflow")
    # A definition no scheduler could read is refused here (INVALID_ARGUMENT), not stored.
    cron.check(schedule.cron, schedule.timezone, schedule.catch_up)


def _audit_limit(values: dict[str, Any]) -> None:
    values["query"] = dataclasses.replace(values["query"], limit=max(1, values["query"].limit))


def _new(values: dict[str, Any]) -> None:
    check_plain(values["new"].key, "key")
    check_name(values["new"].name, "name")


def _queue_slot(values: dict[str, Any]) -> None:
    text_of(values["admission"].queue, "queue")
    text_of(values["admission"].holder, "holder")
    if values["admission"].priority not in range(6):  # 0: the default level
        raise ValueError(f"priority is 1..5 (0: 3), not {values['admission'].priority}")


def _publication(values: dict[str, Any]) -> None:
    publication = values["publication"]
    for output in publication.outputs:
        if output.kind not in ("event", "stream"):
            raise ValueError(f"an output is an event or a stream item, not {output.kind!r}")
        check_plain(output.name, f"{output.kind} name")
    for attribute in publication.attributes:
        check_plain(attribute.name, "search attribute")


def _plain(name: str) -> Callable[[dict[str, Any]], None]:
    return lambda values: check_plain(values[name], name)


def _named(name: str) -> Callable[[dict[str, Any]], None]:
    return lambda values: check_name(values[name], name)


ARGUMENTS: Mapping[str, Callable[[dict[str, Any]], None]] = {
    "CreateWorkflow": _new,
    "ForkWorkflow": lambda values: check_plain(values["fork"].key, "key"),
    "SendSignal": _named("name"),
    "FinishWorkflow": _ending(FINISHED),
    "EndWorkflow": _ending(ENDED_BY_REQUEST),
    "PutSchedule": _schedule,
    "AcquireQueueSlot": _queue_slot,
    "ListAudit": _audit_limit,
    "PauseCalls": _named("name"),  # its kind is the store's to check
    "Publish": _publication,
}
"""What a verb asks of its arguments beyond their fields' checks (ValueError: INVALID_ARGUMENT);
a rule may also settle a value (``ListAudit``'s limit is at least 1)."""


def check_arguments(rpc: str, values: dict[str, Any]) -> None:
    """Apply ``rpc``'s rule, if it has one, to its arguments."""
    rule = ARGUMENTS.get(rpc)
    if rule is not None:
        rule(values)


# ----------------------------------------------------------------------------- wire format

_GUARDED = "/sagaway.v1.Engine/"


class _Corrupt:
    """Stands in for a request whose bytes did not parse."""

    def __init__(self, why: str) -> None:
        self.why = why


def _parse(deserializer: Callable[[bytes], Any] | None) -> Callable[[bytes], Any]:
    def parse(data: bytes) -> Any:
        if deserializer is None:
            return data
        try:
            return deserializer(data)
        except Exception as exc:  # DecodeError, or anything a corrupt message provokes
            return _Corrupt(f"malformed request: {' '.join(str(exc).split())}")

    return parse


async def _refuse(request: _Corrupt, context: grpc.aio.ServicerContext[Any, Any]) -> None:
    await context.abort(grpc.StatusCode.INVALID_ARGUMENT, request.why)


def _guard(handler: Handler) -> Handler:
    parse = _parse(handler.request_deserializer)
    if handler.unary_unary is not None:
        behavior: Any = handler.unary_unary

        async def unary(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
            if isinstance(request, _Corrupt):
                await _refuse(request, context)
            return await behavior(request, context)

        return grpc.unary_unary_rpc_method_handler(
            unary, request_deserializer=parse, response_serializer=handler.response_serializer
        )
    streaming: Any = handler.unary_stream

    async def stream(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        if isinstance(request, _Corrupt):
            await _refuse(request, context)
        async for item in streaming(request, context):
            yield item

    assert inspect.isasyncgenfunction(streaming), "Engine streams are async generators"
    return grpc.unary_stream_rpc_method_handler(
        stream, request_deserializer=parse, response_serializer=handler.response_serializer
    )


class WireGuard(grpc.aio.ServerInterceptor):
    """Refuse (INVALID_ARGUMENT) an Engine request whose bytes are not its message, instead of
    gRPC's UNKNOWN with the parser's stack trace in the server's log."""

    async def intercept_service(
        self, continuation: Continuation, details: grpc.HandlerCallDetails
    ) -> Handler | None:
        handler = await continuation(details)
        if handler is None or handler.request_streaming or not details.method.startswith(_GUARDED):
            return handler
        return _guard(handler)
