"""The Engine service: each RPC is one Store verb, applied by the server's store.

Requests are checked (``checks``) and errors mapped to status codes (``status``) in one place,
``_verb``. On SQLite the service announces the changes it makes (``Hub``), since the file has no
notices of its own. An operator action's audit entry is the server's to sign (``audit``): who
is the caller it authenticated, whatever the client says.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

import grpc
import grpc.aio

from sagaway import __version__
from sagaway._engine.text_checks import check_name, check_plain
from sagaway.server.batch import run_batch
from sagaway.server.checks import max_request_bytes
from sagaway.server.operators import OperatorService
from sagaway.server.status import Refusal
from sagaway.server.verbs import (
    ENDED_BY_REQUEST,
    FINISHED,
    created_reply,
    ending,
    maybe_reply,
    queues_of,
    verb,
)
from sagaway.states import WorkflowStatus
from sagaway.store import notices
from sagaway.store.records import (
    Lease,
    NewWorkflow,
    StepRecord,
)
from sagaway.store.remote import wire
from sagaway.v1 import engine_pb2 as pb


class _Undecided(Exception):
    """A pending signal's payload has no decision from the client yet."""


class EngineService(OperatorService):
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

    # ------------------------------------------------------------------ workflows

    @verb
    async def CreateWorkflow(
        self, request: pb.CreateWorkflowRequest, context: Any
    ) -> pb.CreateWorkflowReply:
        check_plain(request.new.key, "key")
        check_name(request.new.name, "name")
        now = self.clock.now(request.now)
        lease = wire.from_message(Lease, request.lease) if request.HasField("lease") else None
        result = await self.store.create_workflow(
            wire.from_message(NewWorkflow, request.new),
            now=now,
            lease=None if lease is None else self.clock.lease(lease, now),
            replace_live=request.replace_live,
            audit=self._note(request, "start", "schedule.trigger"),
        )
        if result.created:
            if result.replaced_run_id is not None:
                self._ended(result.replaced_run_id)
            if not request.HasField("lease"):
                self._ready()
        return created_reply(result)

    @verb
    async def ForkWorkflow(
        self, request: pb.ForkWorkflowRequest, context: Any
    ) -> pb.ForkWorkflowReply:
        check_plain(request.key, "key")
        result = await self.store.fork_workflow(
            request.source_run_id,
            run_id=request.run_id,
            key=request.key,
            key_space=request.key_space,
            call_ids=list(request.call_ids),
            now=self.clock.now(request.now),
            code_version=wire.optional(request, "code_version"),
            payloads=wire.fork_payloads_of(request),
            audit=self._note(request, "fork"),
        )
        if result is None:
            return pb.ForkWorkflowReply()
        if result.created:
            self._ready()
        return pb.ForkWorkflowReply(result=created_reply(result))

    @verb
    async def GetWorkflow(self, request: pb.KeyRequest, context: Any) -> pb.MaybeWorkflow:
        return maybe_reply(await self.store.get_workflow(request.key))

    @verb
    async def GetRun(self, request: pb.RunRequest, context: Any) -> pb.MaybeWorkflow:
        return maybe_reply(await self.store.get_run(request.run_id))

    @verb
    async def ListWorkflows(self, request: pb.ListWorkflowsRequest, context: Any) -> pb.Workflows:
        status = wire.workflow_status(request.status) if request.HasField("status") else None
        records = await self.store.list_workflows(status=status, limit=request.limit)
        return pb.Workflows(records=[wire.workflow(r) for r in records])

    @verb
    async def LoadSteps(self, request: pb.RunRequest, context: Any) -> pb.StepList:
        steps = await self.store.load_steps(request.run_id)
        return pb.StepList(steps=[wire.step(s) for s in steps])

    @verb
    async def LoadStepsMany(self, request: pb.RunIds, context: Any) -> pb.StepsByRun:
        found = await self.store.load_steps_many(list(request.run_ids))
        reply = pb.StepsByRun()
        for run_id, steps in found.items():
            reply.steps[run_id].steps.extend(wire.step(s) for s in steps)
        return reply

    @verb
    async def RecordStep(self, request: pb.RecordStepRequest, context: Any) -> pb.Empty:
        await self.store.record_step(
            wire.from_message(StepRecord, request.step), token=request.token
        )
        return pb.Empty()

    @verb
    async def FinishWorkflow(self, request: pb.FinishWorkflowRequest, context: Any) -> pb.Empty:
        await self.store.finish_workflow(
            request.run_id,
            token=request.token,
            status=ending(request.status, FINISHED),
            result=wire.optional(request, "result"),
            error=wire.optional(request, "error"),
            now=self.clock.now(request.now),
            final_step=(
                wire.from_message(StepRecord, request.final_step)
                if request.HasField("final_step")
                else None
            ),
            has_parent=request.has_parent,
            cancel_seen=request.cancel_seen,
        )
        # A top-level workflow's end makes nothing due: every application's recovery need not look.
        self._ended(request.run_id, parent=request.has_parent)
        return pb.Empty()

    @verb
    async def SuspendWorkflow(self, request: pb.SuspendWorkflowRequest, context: Any) -> pb.Empty:
        await self.store.suspend_workflow(
            request.run_id,
            token=request.token,
            error=request.error,
            now=self.clock.now(request.now),
            next_run_at=request.next_run_at,
        )
        self._ready()
        return pb.Empty()

    @verb
    async def ReleaseWorkflow(self, request: pb.ReleaseWorkflowRequest, context: Any) -> pb.Empty:
        await self.store.release_workflow(
            request.run_id, token=request.token, now=self.clock.now(request.now)
        )
        self._ready()
        return pb.Empty()

    @verb
    async def RenewLeases(self, request: pb.RenewLeasesRequest, context: Any) -> pb.Tokens:
        # The client's expiry, at most max_lease from the server's now: a renewal cannot keep
        # a lease for longer than the server allows.
        expires_at = self.clock.renewal(request.expires_at)
        kept = await self.store.renew_leases(list(request.tokens), expires_at=expires_at)
        return pb.Tokens(tokens=sorted(kept))

    @verb
    async def ClaimDue(self, request: pb.ClaimDueRequest, context: Any) -> pb.ClaimDueReply:
        claimed = await self.store.claim_due(
            owner=request.owner,
            now=self.clock.now(request.now),
            lease_timeout=self.clock.lease_timeout(request.lease_timeout),
            limit=request.limit,
            exclude=list(request.exclude),
            queues=queues_of(request),
            versions=wire.versions_of(request),
        )
        return pb.ClaimDueReply(
            claimed=[pb.Claimed(record=wire.workflow(r), lease=wire.lease(le)) for r, le in claimed]
        )

    @verb
    async def NextDue(self, request: pb.NextDueRequest, context: Any) -> pb.NextDueReply:
        at = await self.store.next_due(
            owner=request.owner, queues=queues_of(request), versions=wire.versions_of(request)
        )
        return pb.NextDueReply(at=at)

    @verb
    async def EndWorkflow(self, request: pb.EndWorkflowRequest, context: Any) -> pb.Done:
        status = ending(request.status, ENDED_BY_REQUEST)
        action = "terminate" if status is WorkflowStatus.TERMINATED else "cancel"
        changed = await self.store.end_workflow(
            request.run_id,
            status=status,
            error=wire.optional(request, "error"),
            now=self.clock.now(request.now),
            audit=self._note(request, action),
        )
        if changed:
            self._ended(request.run_id)
        return pb.Done(changed=changed)

    @verb
    async def RequestCancel(self, request: pb.RequestCancelRequest, context: Any) -> pb.Done:
        changed = await self.store.request_cancel(
            request.run_id,
            reason=request.reason,
            now=self.clock.now(request.now),
            audit=self._note(request, "cancel"),
        )
        if changed and self.announce:
            self.hub.publish(notices.CancelRequested(request.run_id))
            self.hub.publish(notices.READY)
        return pb.Done(changed=changed)

    @verb
    async def CancelRequests(self, request: pb.RunIds, context: Any) -> pb.CancelRequestsReply:
        reasons = await self.store.cancel_requests(list(request.run_ids))
        return pb.CancelRequestsReply(reasons=reasons)

    @verb
    async def RetryNow(self, request: pb.RetryNowRequest, context: Any) -> pb.Done:
        changed = await self.store.retry_now(
            request.run_id, now=self.clock.now(request.now), audit=self._note(request, "retry")
        )
        if changed:
            self._ready()
        return pb.Done(changed=changed)

    @verb
    async def CountByStatus(
        self, request: pb.CountByStatusRequest, context: Any
    ) -> pb.StatusCounts:
        counts = await self.store.count_by_status()
        return pb.StatusCounts(counts={s.value: n for s, n in counts.items()})

    # ------------------------------------------------------------------ waits

    @verb
    async def SendSignal(self, request: pb.SendSignalRequest, context: Any) -> pb.SendSignalReply:
        check_name(request.name, "name")
        record, stored = await self.store.send_signal(
            request.key,
            name=request.name,
            payload=request.payload,
            dedupe_id=wire.optional(request, "dedupe_id"),
            now=self.clock.now(request.now),
            run_id=wire.optional(request, "run_id"),
            audit=self._note(request, "signal"),
        )
        if stored:
            self._ready()
        return pb.SendSignalReply(record=wire.workflow(record) if record else None, stored=stored)

    @verb
    async def ReceiveSignal(
        self, request: pb.ReceiveSignalRequest, context: Any
    ) -> pb.ReceiveSignalReply:
        decisions = dict(request.decisions)

        def accept(payload: str) -> str | None:
            if payload not in decisions:
                raise _Undecided  # nothing is written: the store's transaction rolls back
            return decisions[payload] or None

        try:
            payload = await self.store.receive_signal(
                request.run_id,
                token=request.token,
                name=request.name,
                call_id=request.call_id,
                started_at=request.started_at,
                deadline=wire.optional(request, "deadline"),
                wait=request.wait,
                accept=accept,
                now=self.clock.now(request.now),
            )
        except _Undecided:
            signals = await self.store.list_signals(request.run_id)
            pending = {
                s.payload
                for s in signals
                if s.name == request.name and s.consumed_call is None and s.rejected is None
            }
            return pb.ReceiveSignalReply(undecided=sorted(pending - decisions.keys()))
        if payload is None and request.wait:
            self._ready()  # it waits until a deadline: the recovery's next look may change
        return pb.ReceiveSignalReply(payload=payload)

    @verb
    async def WaitWorkflow(self, request: pb.WaitWorkflowRequest, context: Any) -> pb.Empty:
        await self.store.wait_workflow(
            request.run_id,
            token=request.token,
            waiting_for=request.waiting_for,
            next_run_at=wire.optional(request, "next_run_at"),
            step=wire.from_message(StepRecord, request.step) if request.HasField("step") else None,
            now=self.clock.now(request.now),
        )
        self._ready()
        return pb.Empty()

    @verb
    async def WaitForChild(self, request: pb.WaitForChildRequest, context: Any) -> pb.MaybeWorkflow:
        record = await self.store.wait_for_child(
            request.run_id,
            token=request.token,
            child_key=request.child_key,
            wait=request.wait,
            now=self.clock.now(request.now),
        )
        if request.wait:
            self._ready()
        return maybe_reply(record)

    @verb
    async def ListSignals(self, request: pb.RunRequest, context: Any) -> pb.Signals:
        signals = await self.store.list_signals(request.run_id)
        return pb.Signals(signals=[wire.signal(s) for s in signals])

    @verb
    async def ListCancelRequests(
        self, request: pb.RunRequest, context: Any
    ) -> pb.CancelRequestList:
        requests = await self.store.list_cancel_requests(request.run_id)
        return pb.CancelRequestList(
            requests=[wire.to_message(r, pb.CancelRequestRecord()) for r in requests]
        )

    @verb
    async def Batch(self, request: pb.BatchRequest, context: Any) -> pb.BatchReply:
        return await run_batch(self, request)
