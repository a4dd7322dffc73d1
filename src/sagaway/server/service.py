"""The Engine service: each RPC is one Store verb, applied by the server's store.

Every Store verb's handler is made by rule (``verbs.store_verb``): its request read into the
verb's arguments, checked, stamped with the server's time, its audit entry signed by the server,
its change announced on SQLite, its result written into the reply. Written out here are the
calls that are not one Store verb each: the session (``Hello``, ``ServerTime``, ``Watch``), the
start-and-wait calls of thin clients (``StartWorkflow``, ``AwaitWorkflow``), ``Batch``, and
``ReceiveSignal``, whose client decides each payload in rounds (the server cannot judge them).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

import grpc
import grpc.aio

from sagaway import __version__
from sagaway.server.batch import run_batch
from sagaway.server.checks import max_request_bytes
from sagaway.server.status import Refusal
from sagaway.server.verbs import ServiceBase, store_verb, verb
from sagaway.store import notices
from sagaway.store.remote import wire
from sagaway.store.remote.verbs import BY_RPC
from sagaway.v1 import engine_pb2 as pb


class _Undecided(Exception):
    """A pending signal's payload has no decision from the client yet."""


class EngineService(ServiceBase):
    """The ``sagaway.v1.Engine`` service over one opened store."""

    # ------------------------------------------------------------------ session

    @verb
    async def Hello(self, request: pb.HelloRequest, context: Any) -> pb.HelloReply:
        if request.protocol_version != wire.PROTOCOL_VERSION:
            raise Refusal(
                grpc.StatusCode.FAILED_PRECONDITION,
                f"incompatible protocol version: the client speaks {request.protocol_version}, "
                f"this server (sagaway {__version__}) speaks {wire.PROTOCOL_VERSION}; use "
                "client and server of the same release",
                "ProtocolVersion",
            )
        return pb.HelloReply(
            protocol_version=wire.PROTOCOL_VERSION,
            server_version=__version__,
            backend=self.backend,
            url=self.store.url,
            max_request_bytes=max_request_bytes(self.payload_limit),
            max_lease=self.clock.max_lease,
            trusts_client_clock=self.clock.trust_client,
        )

    @verb
    async def ServerTime(self, request: pb.ServerTimeRequest, context: Any) -> pb.ServerTimeReply:
        now = await self.store.server_time()
        return pb.ServerTimeReply(now=time.time() if now is None else now)

    async def Watch(
        self, request: pb.WatchRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> AsyncIterator[pb.Notice]:
        queue = self.hub.subscribe()
        try:
            if self.hub.listening:
                yield pb.Notice(payload=notices.encode(notices.Listening()))
            while True:
                notice = await queue.get()
                if notice is None:
                    return  # the server is stopping
                self.hub.taken(queue, notice)
                yield pb.Notice(payload=notices.encode(notice))
        finally:
            self.hub.unsubscribe(queue)

    @verb
    async def StartWorkflow(
        self, request: pb.StartWorkflowRequest, context: Any
    ) -> pb.StartWorkflowReply:
        record, created = await self.starts.start(request)
        return pb.StartWorkflowReply(record=wire.workflow(record), created=created)

    @verb
    async def AwaitWorkflow(
        self, request: pb.AwaitWorkflowRequest, context: Any
    ) -> pb.WorkflowRecord:
        return wire.workflow(await self.starts.wait(request.key, request.timeout))

    @verb
    async def ReceiveSignal(
        self, request: pb.ReceiveSignalRequest, context: Any
    ) -> pb.ReceiveSignalReply:
        decisions = dict(request.decisions)

        def accept(payload: str) -> str | None:
            if payload not in decisions:
                raise _Undecided  # nothing is written: the store's transaction rolls back
            return decisions[payload] or None

        spec = BY_RPC["ReceiveSignal"]
        values = self.arguments(spec, request)
        try:
            payload = await spec.call(self.store, {**values, "accept": accept})
        except _Undecided:
            signals = await self.store.list_signals(request.run_id)
            pending = {
                s.payload
                for s in signals
                if s.name == request.name and s.consumed_call is None and s.rejected is None
            }
            return pb.ReceiveSignalReply(undecided=sorted(pending - decisions.keys()))
        self.announced(spec.rpc, values, payload)
        return pb.ReceiveSignalReply(payload=payload)

    @verb
    async def Batch(self, request: pb.BatchRequest, context: Any) -> pb.BatchReply:
        return await run_batch(self, request)


WRITTEN_OUT = frozenset(
    {"Hello", "ServerTime", "Watch", "StartWorkflow", "AwaitWorkflow", "ReceiveSignal", "Batch"}
)
"""The RPCs whose handlers are written above; every other is a Store verb's, made by rule."""

for _rpc, _spec in BY_RPC.items():
    if _rpc not in WRITTEN_OUT:
        setattr(EngineService, _rpc, store_verb(_spec))
