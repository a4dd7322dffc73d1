"""The Engine service's common parts: ``verb`` (check the request, run it, report an error as a
status code), the state every handler uses (``ServiceBase``) and small reply helpers."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import grpc
import grpc.aio

from sagaway.server import audit
from sagaway.server.checks import check_message
from sagaway.server.clock import ServerClock
from sagaway.server.notices import Hub
from sagaway.server.starts import StartWorkflows
from sagaway.server.status import status_of
from sagaway.states import WorkflowStatus
from sagaway.store import Store, notices
from sagaway.store.base import CreateResult
from sagaway.store.records import (
    AuditNote,
    WorkflowRecord,
)
from sagaway.store.remote import wire
from sagaway.v1 import engine_pb2 as pb
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
            check_message(request, self.payload_limit)
            return await fn(self, request, context)
        except Exception as exc:
            code, message, trailing = status_of(exc, fn.__name__)
            context.set_trailing_metadata(trailing)
            await context.abort(code, message)
            raise  # abort raises; this line is for the type checker

    return handle


def created_reply(result: CreateResult) -> pb.CreateWorkflowReply:
    return pb.CreateWorkflowReply(
        record=wire.workflow(result.record),
        created=result.created,
        replaced_run_id=result.replaced_run_id,
    )


def maybe_reply(record: WorkflowRecord | None) -> pb.MaybeWorkflow:
    return pb.MaybeWorkflow(record=wire.workflow(record) if record else None)


FINISHED = frozenset({WorkflowStatus.COMPLETED, WorkflowStatus.FAILED, WorkflowStatus.CANCELLED})
ENDED_BY_REQUEST = frozenset({WorkflowStatus.CANCELLED, WorkflowStatus.TERMINATED})


def ending(name: str, allowed: frozenset[WorkflowStatus]) -> WorkflowStatus:
    """The status a call ends a workflow with: one of ``allowed`` (else INVALID_ARGUMENT)."""
    status = wire.workflow_status(name)
    if status not in allowed:
        names = " or ".join(sorted(s.value for s in allowed))
        raise ValueError(f"status must be {names}, not {name}")
    return status


def queues_of(request: Any) -> list[str] | None:
    return None if request.any_queue else list(request.queues)


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

    def _note(self, request: Any, *actions: str) -> AuditNote | None:
        """The audit entry ``request`` carries, signed by this server (None: none)."""
        return audit.note(request, *actions, token=self.token)

    def _ready(self) -> None:
        if self.announce:
            self.hub.publish(notices.READY)

    def _ended(self, run_id: str, *, parent: bool = True) -> None:
        if self.announce:
            self.hub.publish(notices.Ended(run_id))
            if parent:
                self.hub.publish(notices.READY)  # a parent waiting for it is due


def text_of(value: str, what: str) -> str:
    """A queue limit's name or holder from the wire: a non-empty string (ValueError)."""
    if not value:
        raise ValueError(f"{what} must be a non-empty string")
    return value
