"""The gRPC handler types the server's interceptors (``auth``, ``checks``) share."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeAlias

import grpc

Handler: TypeAlias = "grpc.RpcMethodHandler[Any, Any]"
"""A method's handler, as an interceptor is given it and gives it on."""
Continuation: TypeAlias = "Callable[[grpc.HandlerCallDetails], Awaitable[Handler | None]]"
"""What an interceptor calls for the handler of the next one (None: no such method)."""
