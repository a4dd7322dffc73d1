"""Bearer-token authentication of every call (``authorization: Bearer <token>``), compared in
constant time. Health checks need no token: orchestrators probe them without secrets."""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Awaitable, Callable
from typing import Any

import grpc
import grpc.aio

_OPEN_PREFIX = "/grpc.health.v1.Health/"


def _digest(text: str) -> bytes:
    # Digests have one length, so the comparison says nothing about the token's length either.
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()


def _deny(
    message: str, handler: grpc.RpcMethodHandler[Any, Any]
) -> grpc.RpcMethodHandler[Any, Any]:
    async def unary(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        await context.abort(grpc.StatusCode.UNAUTHENTICATED, message)

    async def stream(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        await context.abort(grpc.StatusCode.UNAUTHENTICATED, message)
        yield  # pragma: no cover - a generator for the streaming kind

    if handler.response_streaming:
        return grpc.unary_stream_rpc_method_handler(
            stream,
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )
    return grpc.unary_unary_rpc_method_handler(
        unary,
        request_deserializer=handler.request_deserializer,
        response_serializer=handler.response_serializer,
    )


class TokenAuth(grpc.aio.ServerInterceptor):
    """Refuse (UNAUTHENTICATED) every call that does not carry the server's token."""

    def __init__(self, token: str) -> None:
        self._expected = _digest(f"Bearer {token}")

    async def intercept_service(
        self,
        continuation: Callable[
            [grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler[Any, Any] | None]
        ],
        details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler[Any, Any] | None:
        handler = await continuation(details)
        if handler is None or details.method.startswith(_OPEN_PREFIX):
            return handler
        given = ""
        for name, value in details.invocation_metadata or ():
            if name == "authorization":
                given = value if isinstance(value, str) else value.decode("latin-1")
        if hmac.compare_digest(_digest(given), self._expected):
            return handler
        why = (
            "no token: send the metadata 'authorization: Bearer <token>'"
            if not given
            else ("wrong token")
        )
        return _deny(why, handler)
