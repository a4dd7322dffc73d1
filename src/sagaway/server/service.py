"""The Engine service: each RPC is one Store verb, applied by the server's store.

Requests are checked (``checks``) and errors mapped to status codes (``status``) in one place,
``_verb``. On SQLite the service announces the changes it makes (``Hub``), since the file has no
notices of its own. An operator action's audit entry is the server's to sign (``audit``): who
is the caller it authenticated, whatever the client says.
"""

from __future__ import annotations

import functools
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import grpc
import grpc.aio

from sagaway import __version__
from sagaway._engine import cron
from sagaway._engine.text_checks import check_name, check_plain
from sagaway.server import audit
from sagaway.server.batch import run_batch
from sagaway.server.checks import check_message, max_request_bytes
from sagaway.server.clock import ServerClock
from sagaway.server.notices import Hub
from sagaway.server.starts import StartWorkflows
from sagaway.server.status import Refusal, status_of
from sagaway.states import WorkflowStatus
from sagaway.store import Store, notices
from sagaway.store.base import CreateResult
from sagaway.store.records import (
    AuditNote,
    AuditQuery,
    Lease,
    ListQuery,
    NewWorkflow,
    ScheduleRecord,
    StepRecord,
    WorkflowRecord,
)
from sagaway.store.remote import wire
from sagaway.v1 import engine_pb2 as pb
from sagaway.v1 import engine_pb2_grpc as pb_grpc

Req = TypeVar("Req")
Rep = TypeVar("Rep")
Handler = Callable[[Any, Req, grpc.aio.ServicerContext[Any, Any]], Awaitable[Rep]]


def _verb(fn: Handler[Req, Rep]) -> Handler[Req, Rep]:
    """Check the request, run the verb, and report any error as a status code."""

    @functools.wraps(fn)
    async def handle(
        self: EngineService, request: Req, context: grpc.aio.ServicerContext[Any, Any]
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


def _created(result: CreateResult) -> pb.CreateWorkflowReply:
    return pb.CreateWorkflowReply(
        record=wire.workflow(result.record),
        created=result.created,
        replaced_run_id=result.replaced_run_id,
    )


def _maybe(record: WorkflowRecord | None) -> pb.MaybeWorkflow:
    return pb.MaybeWorkflow(record=wire.workflow(record) if record else None)


_FINISHED = frozenset({WorkflowStatus.COMPLETED, WorkflowStatus.FAILED, WorkflowStatus.CANCELLED})
_ENDED_BY_REQUEST = frozenset({WorkflowStatus.CANCELLED, WorkflowStatus.TERMINATED})


def _ending(name: str, allowed: frozenset[WorkflowStatus]) -> WorkflowStatus:
    """The status a call ends a workflow with: one of ``allowed`` (else INVALID_ARGUMENT)."""
    status = wire.workflow_status(name)
    if status not in allowed:
        names = " or ".join(sorted(s.value for s in allowed))
        raise ValueError(f"status must be {names}, not {name}")
    return status


def _queues(request: Any) -> list[str] | None:
    return None if request.any_queue else list(request.queues)


class _Undecided(Exception):
    """A pending signal's payload has no decision from the client yet."""


class EngineService(pb_grpc.EngineServicer):
    """The ``sagaway.v1.Engine`` service over one opened store."""

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

    # ------------------------------------------------------------------ session

    @_verb
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

    @_verb
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

    @_verb
    async def StartWorkflow(
        self, request: pb.StartWorkflowRequest, context: Any
    ) -> pb.StartWorkflowReply:
        record, created = await self.starts.start(request)
        return pb.StartWorkflowReply(record=wire.workflow(record), created=created)

    @_verb
    async def AwaitWorkflow(
        self, request: pb.AwaitWorkflowRequest, context: Any
    ) -> pb.WorkflowRecord:
        return wire.workflow(await self.starts.wait(request.key, request.timeout))

    # ------------------------------------------------------------------ workflows

    @_verb
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
        return _created(result)

    @_verb
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
        return pb.ForkWorkflowReply(result=_created(result))

    @_verb
    async def GetWorkflow(self, request: pb.KeyRequest, context: Any) -> pb.MaybeWorkflow:
        return _maybe(await self.store.get_workflow(request.key))

    @_verb
    async def GetRun(self, request: pb.RunRequest, context: Any) -> pb.MaybeWorkflow:
        return _maybe(await self.store.get_run(request.run_id))

    @_verb
    async def ListWorkflows(self, request: pb.ListWorkflowsRequest, context: Any) -> pb.Workflows:
        status = wire.workflow_status(request.status) if request.HasField("status") else None
        records = await self.store.list_workflows(status=status, limit=request.limit)
        return pb.Workflows(records=[wire.workflow(r) for r in records])

    @_verb
    async def LoadSteps(self, request: pb.RunRequest, context: Any) -> pb.StepList:
        steps = await self.store.load_steps(request.run_id)
        return pb.StepList(steps=[wire.step(s) for s in steps])

    @_verb
    async def LoadStepsMany(self, request: pb.RunIds, context: Any) -> pb.StepsByRun:
        found = await self.store.load_steps_many(list(request.run_ids))
        reply = pb.StepsByRun()
        for run_id, steps in found.items():
            reply.steps[run_id].steps.extend(wire.step(s) for s in steps)
        return reply

    @_verb
    async def RecordStep(self, request: pb.RecordStepRequest, context: Any) -> pb.Empty:
        await self.store.record_step(
            wire.from_message(StepRecord, request.step), token=request.token
        )
        return pb.Empty()

    @_verb
    async def FinishWorkflow(self, request: pb.FinishWorkflowRequest, context: Any) -> pb.Empty:
        await self.store.finish_workflow(
            request.run_id,
            token=request.token,
            status=_ending(request.status, _FINISHED),
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

    @_verb
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

    @_verb
    async def ReleaseWorkflow(self, request: pb.ReleaseWorkflowRequest, context: Any) -> pb.Empty:
        await self.store.release_workflow(
            request.run_id, token=request.token, now=self.clock.now(request.now)
        )
        self._ready()
        return pb.Empty()

    @_verb
    async def RenewLeases(self, request: pb.RenewLeasesRequest, context: Any) -> pb.Tokens:
        # The client's expiry, at most max_lease from the server's now: a renewal cannot keep
        # a lease for longer than the server allows.
        expires_at = self.clock.renewal(request.expires_at)
        kept = await self.store.renew_leases(list(request.tokens), expires_at=expires_at)
        return pb.Tokens(tokens=sorted(kept))

    @_verb
    async def ClaimDue(self, request: pb.ClaimDueRequest, context: Any) -> pb.ClaimDueReply:
        claimed = await self.store.claim_due(
            owner=request.owner,
            now=self.clock.now(request.now),
            lease_timeout=self.clock.lease_timeout(request.lease_timeout),
            limit=request.limit,
            exclude=list(request.exclude),
            queues=_queues(request),
            versions=wire.versions_of(request),
        )
        return pb.ClaimDueReply(
            claimed=[pb.Claimed(record=wire.workflow(r), lease=wire.lease(le)) for r, le in claimed]
        )

    @_verb
    async def NextDue(self, request: pb.NextDueRequest, context: Any) -> pb.NextDueReply:
        at = await self.store.next_due(
            owner=request.owner, queues=_queues(request), versions=wire.versions_of(request)
        )
        return pb.NextDueReply(at=at)

    @_verb
    async def EndWorkflow(self, request: pb.EndWorkflowRequest, context: Any) -> pb.Done:
        status = _ending(request.status, _ENDED_BY_REQUEST)
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

    @_verb
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

    @_verb
    async def CancelRequests(self, request: pb.RunIds, context: Any) -> pb.CancelRequestsReply:
        reasons = await self.store.cancel_requests(list(request.run_ids))
        return pb.CancelRequestsReply(reasons=reasons)

    @_verb
    async def RetryNow(self, request: pb.RetryNowRequest, context: Any) -> pb.Done:
        changed = await self.store.retry_now(
            request.run_id, now=self.clock.now(request.now), audit=self._note(request, "retry")
        )
        if changed:
            self._ready()
        return pb.Done(changed=changed)

    @_verb
    async def CountByStatus(
        self, request: pb.CountByStatusRequest, context: Any
    ) -> pb.StatusCounts:
        counts = await self.store.count_by_status()
        return pb.StatusCounts(counts={s.value: n for s, n in counts.items()})

    # ------------------------------------------------------------------ waits

    @_verb
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

    @_verb
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

    @_verb
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

    @_verb
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
        return _maybe(record)

    @_verb
    async def ListSignals(self, request: pb.RunRequest, context: Any) -> pb.Signals:
        signals = await self.store.list_signals(request.run_id)
        return pb.Signals(signals=[wire.signal(s) for s in signals])

    @_verb
    async def ListCancelRequests(
        self, request: pb.RunRequest, context: Any
    ) -> pb.CancelRequestList:
        requests = await self.store.list_cancel_requests(request.run_id)
        return pb.CancelRequestList(
            requests=[wire.to_message(r, pb.CancelRequestRecord()) for r in requests]
        )

    # ------------------------------------------------------------------ retention, inspection

    @_verb
    async def PurgeEnded(self, request: pb.PurgeEndedRequest, context: Any) -> pb.RunIds:
        statuses = [wire.workflow_status(s) for s in request.statuses] or None
        run_ids = await self.store.purge_ended(
            before=request.before, statuses=statuses, limit=request.limit
        )
        return pb.RunIds(run_ids=run_ids)

    @_verb
    async def CountPurgeable(self, request: pb.CountPurgeableRequest, context: Any) -> pb.Count:
        statuses = [wire.workflow_status(s) for s in request.statuses] or None
        return pb.Count(
            count=await self.store.count_purgeable(before=request.before, statuses=statuses)
        )

    @_verb
    async def ListPage(self, request: pb.ListPageRequest, context: Any) -> pb.Workflows:
        has_after = request.HasField("after_created_at"), request.HasField("after_run_id")
        if has_after[0] != has_after[1]:
            raise ValueError("after_created_at and after_run_id go together")
        query = ListQuery(
            limit=request.limit,
            statuses=frozenset(wire.workflow_status(s) for s in request.statuses),
            name=wire.optional(request, "name"),
            key_prefix=request.key_prefix,
            since=wire.optional(request, "since"),
            until=wire.optional(request, "until"),
            after=(request.after_created_at, request.after_run_id) if has_after[0] else None,
            code_versions=frozenset(
                [*request.code_versions, *([None] if request.unversioned else [])]
            ),
        )
        records = await self.store.list_page(query)
        return pb.Workflows(records=[wire.workflow(r) for r in records])

    @_verb
    async def ListAttemptErrors(self, request: pb.RunRequest, context: Any) -> pb.AttemptErrors:
        found = await self.store.list_attempt_errors(request.run_id)
        return pb.AttemptErrors(errors=[wire.attempt_error(e) for e in found])

    # ------------------------------------------------------------------ schedules

    @_verb
    async def PutSchedule(self, request: pb.PutScheduleRequest, context: Any) -> pb.ScheduleRecord:
        schedule = wire.from_message(ScheduleRecord, request.schedule)
        check_plain(schedule.id, "schedule id")
        check_name(schedule.workflow, "workflow")
        # A definition no scheduler could read is refused here (INVALID_ARGUMENT), not stored.
        cron.check(schedule.cron, schedule.timezone, schedule.catch_up)
        stored = await self.store.put_schedule(
            schedule,
            keep_paused=request.keep_paused,
            now=self.clock.now(request.now),
            audit=self._note(request, "schedule.put"),
        )
        if self.announce:
            self.hub.publish(notices.SCHEDULES_CHANGED)
        return wire.schedule(stored)

    @_verb
    async def ListSchedules(self, request: pb.ListSchedulesRequest, context: Any) -> pb.Schedules:
        found = await self.store.list_schedules()
        return pb.Schedules(schedules=[wire.schedule(s) for s in found])

    @_verb
    async def SetSchedulePaused(
        self, request: pb.SetSchedulePausedRequest, context: Any
    ) -> pb.MaybeSchedule:
        stored = await self.store.set_schedule_paused(
            request.id,
            paused=request.paused,
            next_tick_at=request.next_tick_at,
            now=self.clock.now(request.now),
            audit=self._note(request, "schedule.pause" if request.paused else "schedule.resume"),
        )
        if self.announce:
            self.hub.publish(notices.SCHEDULES_CHANGED)
        return pb.MaybeSchedule(schedule=wire.schedule(stored) if stored else None)

    @_verb
    async def DeleteSchedule(self, request: pb.ScheduleIdRequest, context: Any) -> pb.Done:
        deleted = await self.store.delete_schedule(
            request.id, audit=self._note(request, "schedule.delete")
        )
        return pb.Done(changed=deleted)

    # ------------------------------------------------------------------ audit trail

    @_verb
    async def RecordAudit(self, request: pb.RecordAuditRequest, context: Any) -> pb.Empty:
        note = self._note(request, "purge")
        if note is None:
            raise ValueError("RecordAudit needs its audit note")
        await self.store.record_audit(note, target=wire.optional(request, "target"))
        return pb.Empty()

    @_verb
    async def ListAudit(self, request: pb.ListAuditRequest, context: Any) -> pb.AuditList:
        query = AuditQuery(
            limit=max(1, request.limit),
            before_seq=wire.optional(request, "before_seq"),
            run_id=wire.optional(request, "run_id"),
            target=wire.optional(request, "target"),
            actor=wire.optional(request, "actor"),
            actions=frozenset(request.actions),
            since=wire.optional(request, "since"),
            until=wire.optional(request, "until"),
        )
        found = await self.store.list_audit(query)
        return pb.AuditList(entries=[wire.audit_record(r) for r in found])

    @_verb
    async def FireSchedule(self, request: pb.FireScheduleRequest, context: Any) -> pb.Done:
        won = await self.store.fire_schedule(
            request.id,
            tick_at=request.tick_at,
            next_tick_at=request.next_tick_at,
            last_tick_at=wire.optional(request, "last_tick_at"),
            starts=[wire.from_message(NewWorkflow, new) for new in request.starts],
            now=self.clock.now(request.now),
        )
        if won and request.starts:
            self._ready()  # the executions it created are due
        return pb.Done(changed=won)

    @_verb
    async def AcquireQueueSlot(
        self, request: pb.AcquireQueueSlotRequest, context: Any
    ) -> pb.AcquireQueueSlotReply:
        now = self.clock.now(request.now)
        retry_at = await self.store.acquire_queue_slot(
            _text(request.queue, "queue"),
            holder=_text(request.holder, "holder"),
            concurrency=wire.optional(request, "concurrency"),
            rate_per_second=wire.optional(request, "rate_per_second"),
            expires_at=self.clock.expires_at(request.expires_at, now),
            now=now,
        )
        return pb.AcquireQueueSlotReply(retry_at=retry_at)

    @_verb
    async def RenewQueueSlot(self, request: pb.RenewQueueSlotRequest, context: Any) -> pb.Done:
        now = self.clock.now(request.now)
        renewed = await self.store.renew_queue_slot(
            request.queue,
            holder=request.holder,
            expires_at=self.clock.expires_at(request.expires_at, now),
            now=now,
        )
        return pb.Done(changed=renewed)

    @_verb
    async def ReleaseQueueSlot(self, request: pb.ReleaseQueueSlotRequest, context: Any) -> pb.Empty:
        await self.store.release_queue_slot(
            request.queue, holder=request.holder, now=self.clock.now(request.now)
        )
        self._ready()
        return pb.Empty()

    @_verb
    async def Batch(self, request: pb.BatchRequest, context: Any) -> pb.BatchReply:
        return await run_batch(self, request)


def _text(value: str, what: str) -> str:
    """A queue limit's name or holder from the wire: a non-empty string (ValueError)."""
    if not value:
        raise ValueError(f"{what} must be a non-empty string")
    return value
