"""Who is calling, and whether they may: each Engine call is authenticated, then judged by
its principal's roles (``roles.refusal``), before the service sees it.

- **Who.** A bearer token (``authorization: Bearer <token>``) names its principal by the
  server's credentials (``sagaway.credentials``: the tokens file's entries, and the single
  token as ``default`` with every role). Without a token, under mutual TLS, the verified
  client certificate's subject (or common name) does, when the tokens file lists it. A server
  given no token at all asks for none: every caller is ``anonymous`` (or, under mutual TLS,
  named by its certificate's subject) with every role, as before roles existed.
- **May.** A call its principal's roles do not allow ends PERMISSION_DENIED, with a message
  naming the principal, the call and the role it needs; an unknown caller ends UNAUTHENTICATED.
- **For the service.** The principal is the current one (``principals.current_principal()``)
  while the call runs: it is set in the very coroutine (or stream) that runs the service's
  method, and for the calls of a ``Batch``, whose tasks copy it.

Health checks need nothing: orchestrators probe them without secrets.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterable
from typing import Any

import grpc
import grpc.aio
from google.protobuf.message import Message

from sagaway.credentials import Credentials
from sagaway.principals import ALL_ROLES, Principal, acting_as, set_current_principal
from sagaway.server import roles
from sagaway.server.grpc_types import Continuation, Handler

logger = logging.getLogger("sagaway.server")
_OPEN_PREFIX = "/grpc.health.v1.Health/"
_ENGINE_PREFIX = "/sagaway.v1.Engine/"
ANONYMOUS = "anonymous"
"""The principal of every caller of a server that asks for no token."""
NO_TOKEN = "no token: send the metadata 'authorization: Bearer <token>'"
WRONG_TOKEN = "wrong token"


def _bearer(metadata: Iterable[tuple[str, str | bytes]] | None) -> str | None:
    """The token of the ``authorization`` metadata ('' if it is not a bearer token; None
    without the metadata)."""
    for name, value in metadata or ():
        if name == "authorization":
            text = value if isinstance(value, str) else value.decode("latin-1")
            scheme, _, token = text.partition(" ")
            return token.strip() if scheme.lower() == "bearer" else ""
    return None


def _certificate(context: grpc.aio.ServicerContext[Any, Any]) -> tuple[str | None, str | None]:
    """The verified peer certificate's subject and common name (None when absent)."""
    found = context.auth_context()

    def first(key: str) -> str | None:
        values = list(found.get(key, ()))
        return values[0].decode("utf-8", "replace") if values else None

    return first("x509_subject"), first("x509_common_name")


class Gate:
    """What the server accepts now. ``credentials`` None: no token is asked for. The
    credentials are replaced whole (``replace``) when the tokens file is reloaded; calls in
    flight keep the principal they were admitted with."""

    def __init__(self, credentials: Credentials | None, *, mutual_tls: bool = False) -> None:
        self.credentials = credentials
        self.mutual_tls = mutual_tls
        """Client certificates are verified by the server's client CA: their subject counts."""

    def replace(self, credentials: Credentials | None) -> None:
        self.credentials = credentials

    def identify(self, context: grpc.aio.ServicerContext[Any, Any]) -> Principal | str:
        """The caller of ``context``, or why it is not known (for UNAUTHENTICATED)."""
        given = _bearer(context.invocation_metadata())
        subject, common_name = _certificate(context) if self.mutual_tls else (None, None)
        credentials = self.credentials
        if credentials is None:
            return Principal(subject or ANONYMOUS, ALL_ROLES)
        if given is not None:
            return credentials.by_token(given) or WRONG_TOKEN
        if subject is not None or common_name is not None:
            found = credentials.by_certificate(subject, common_name)
            if found is not None:
                return found
            return f"{NO_TOKEN}; the client certificate {subject!r} is not in the tokens file"
        return NO_TOKEN


async def _admit(
    gate: Gate, method: str, request: Any, context: grpc.aio.ServicerContext[Any, Any]
) -> Principal:
    """The caller, if it may make this call; else the call ends here."""
    found = gate.identify(context)
    if isinstance(found, str):
        context.set_trailing_metadata((("sagaway-error", "Unauthenticated"),))
        await context.abort(grpc.StatusCode.UNAUTHENTICATED, found)
    # A request that did not parse is judged by its method alone; WireGuard then refuses it.
    why = roles.refusal(found, method, request if isinstance(request, Message) else None)
    if why is not None:
        logger.info("refused: %s", why, extra={"action": "permission_denied"})
        context.set_trailing_metadata((("sagaway-error", "PermissionDenied"),))
        await context.abort(grpc.StatusCode.PERMISSION_DENIED, why)
    return found


def _guarded(handler: Handler, method: str, gate: Gate) -> Handler:
    if handler.unary_unary is not None:
        behavior: Any = handler.unary_unary

        async def unary(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
            principal = await _admit(gate, method, request, context)
            with acting_as(principal):
                return await behavior(request, context)

        return grpc.unary_unary_rpc_method_handler(
            unary,
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )
    if handler.unary_stream is not None:
        streaming: Any = handler.unary_stream

        async def stream(
            request: Any, context: grpc.aio.ServicerContext[Any, Any]
        ) -> AsyncIterator[Any]:
            principal = await _admit(gate, method, request, context)
            # Set, not reset: a stream's generator may be closed from another context (where
            # a reset fails), and the call's task ends with its stream anyway.
            set_current_principal(principal)
            async for item in streaming(request, context):
                yield item

        return grpc.unary_stream_rpc_method_handler(
            stream,
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )
    raise TypeError(f"{method}: client-streaming calls are not served")  # none in the protocol


class TokenAuth(grpc.aio.ServerInterceptor):
    """Authenticate every Engine call and check its principal's roles (see the module)."""

    def __init__(self, gate: Gate) -> None:
        self.gate = gate

    async def intercept_service(
        self, continuation: Continuation, details: grpc.HandlerCallDetails
    ) -> Handler | None:
        handler = await continuation(details)
        if handler is None or details.method.startswith(_OPEN_PREFIX):
            return handler
        # Another service's method is in no table: refused (default deny).
        method = details.method.removeprefix(_ENGINE_PREFIX)
        return _guarded(handler, method, self.gate)
