"""The Engine service's common parts: ``verb`` (check the request, run it, report an error as a
status code), the state every handler uses (``ServiceBase``), and ``store_verb``: the handler
of a Store verb's RPC, made by rule rather than written out.

A Store verb's call goes through the same steps whatever the verb: its arguments read from the
request (``store.remote.verbs``), the verb's own checks (``checks.check_arguments``), the
server's times and lease limits (``clock.apply``), its audit entry signed by the server
(``audit.note_of``), the store's answer, the notices a SQLite server announces
(``notices.announce``), and the reply made from the answer.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import grpc
import grpc.aio

from sagaway.server import audit
from sagaway.server.checks import check_arguments, check_message
from sagaway.server.clock import ServerClock, set_client_now
from sagaway.server.notices import Hub, announce
from sagaway.server.starts import StartWorkflows
from sagaway.server.status import status_of
from sagaway.store import Store
from sagaway.store.remote.verbs import Verb
from sagaway.v1 import engine_pb2_grpc as pb_grpc

Req = TypeVar("Req")
Rep = TypeVar("Rep")
Handler = Callable[[Any, Req, grpc.aio.ServicerContext[Any, Any]], Awaitable[Rep]]


def verb(fn: Handler[Req, Rep]) -> Handler[Req, Rep]:
    """Check the request, run the verb, and report any error as a status code."""

    @functools.wraps(fn)
    async def handle(
        self: ServiceBase, request: Req, context: grpc.aio.ServicerContext[Any, Any]
    ) -> Rep:
        try:
            if context is not None:  # a Batch's calls see its caller's
                audit.set_call(context)
                if self.clock.trust_client:
                    set_client_now(context.invocation_metadata())
            check_message(request, self.payload_limit)
            return await fn(self, request, context)
        except Exception as exc:
            code, message, trailing = status_of(exc, fn.__name__)
            context.set_trailing_metadata(trailing)
            await context.abort(code, message)
            raise  # abort raises; this line is for the type checker

    return handle


class ServiceBase(pb_grpc.EngineServicer):
    """What every handler of the service uses: the store, the clock, the hub of notices and
    the audit signature."""

    def __init__(
        self,
        store: Store,
        hub: Hub,
        *,
        backend: str,
        payload_limit: int,
        clock: ServerClock,
        token: bool = False,
    ) -> None:
        self.store = store
        self.token = token
        """Whether the server checks a token: who an unnamed caller is (``audit.caller``)."""
        self.clock = clock
        """The only clock of lease and timer decisions; it clamps the leases clients ask for."""
        self.hub = hub
        self.backend = backend
        self.payload_limit = payload_limit
        self.announce = backend == "sqlite"
        """Whether this service announces changes itself (the database does not)."""
        self.starts = StartWorkflows(store, hub, announce=self.announce)

    def arguments(self, spec: Verb, request: Any) -> dict[str, Any]:
        """The arguments of ``spec``'s store call from ``request``: checked, at the server's
        times, with its audit entry signed by this server."""
        values = spec.arguments(request)
        check_arguments(spec.rpc, values)
        self.clock.apply(values)
        for param in spec.params:
            if param.kind == "audit":
                required = param.default is not None  # a verb that is its entry: RecordAudit
                values[param.name] = audit.note_of(
                    spec.rpc, request, token=self.token, required=required
                )
        return values

    def announced(self, rpc: str, values: dict[str, Any], result: Any) -> None:
        """Tell the watching applications of the change (SQLite only: PostgreSQL tells)."""
        if self.announce:
            announce(self.hub, rpc, values, result)


def store_verb(spec: Verb) -> Handler[Any, Any]:
    """The handler of the RPC of a Store verb, by rule (see the module's docstring)."""

    async def handle(self: ServiceBase, request: Any, context: Any) -> Any:
        values = self.arguments(spec, request)
        result = await spec.call(self.store, dict(values))
        self.announced(spec.rpc, values, result)
        return spec.reply(result)

    handle.__name__ = handle.__qualname__ = spec.rpc
    return verb(handle)
