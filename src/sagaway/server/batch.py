"""The Batch RPC: several Engine calls in one message, each run as if it had come alone.

A client with many workflows in flight sends their calls together, saving a gRPC round trip
(and its CPU on both sides) per call; the calls run concurrently, so the store's group commit
joins their transactions as it would separate calls'.
"""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

import grpc
from google.protobuf.message import DecodeError

from sagaway.principals import current_principal
from sagaway.server import roles
from sagaway.server.checks import check_message
from sagaway.server.clock import set_client_now
from sagaway.server.status import Refusal, status_of
from sagaway.v1 import engine_pb2 as pb


class Service(Protocol):
    """What a batch needs of the Engine service: its payload limit, and its RPC methods as
    attributes whose ``__wrapped__`` is the method without its error mapping."""

    payload_limit: int


UNBATCHABLE = frozenset({"Hello", "Watch", "Batch", "AwaitWorkflow"})
"""Calls that stream, wait long, or open a session: never in a batch."""
_METHODS = pb.DESCRIPTOR.services_by_name["Engine"].methods_by_name


def _request(call: pb.BatchCall) -> Any:
    method = _METHODS.get(call.method)
    if method is None or call.method in UNBATCHABLE:
        raise Refusal(grpc.StatusCode.INVALID_ARGUMENT, f"{call.method!r} cannot be batched")
    try:
        return getattr(pb, method.input_type.name).FromString(call.request)
    except DecodeError:
        raise Refusal(
            grpc.StatusCode.INVALID_ARGUMENT, f"the request of {call.method} is not its message"
        ) from None


def _entry(key: str, value: str | bytes) -> pb.MetadataEntry:
    return pb.MetadataEntry(key=key, value=value if isinstance(value, bytes) else value.encode())


async def _run_one(service: Service, call: pb.BatchCall) -> pb.BatchResult:
    try:
        request = _request(call)
        # Judged as if it came alone: the batch's principal (set by the server's TokenAuth)
        # needs the roles of this very call.
        why = roles.refusal(current_principal(), call.method, request)
        if why is not None:
            raise Refusal(grpc.StatusCode.PERMISSION_DENIED, why, "PermissionDenied")
        check_message(request, service.payload_limit)
        set_client_now((e.key, e.value) for e in call.metadata)  # its own (a test server's)
        handler = getattr(type(service), call.method).__wrapped__  # without its error mapping
        reply = await handler(service, request, None)
        return pb.BatchResult(code=0, reply=reply.SerializeToString())
    except Exception as exc:
        code, message, trailing = status_of(exc, call.method)
        return pb.BatchResult(
            code=code.value[0], message=message, trailing=[_entry(k, v) for k, v in trailing]
        )


async def run_batch(service: Service, request: pb.BatchRequest) -> pb.BatchReply:
    """Run every call of ``request`` concurrently; one result per call, in order."""
    results = await asyncio.gather(*(_run_one(service, call) for call in request.calls))
    return pb.BatchReply(results=results)
