"""A Store that forwards every verb to an Engine Server (``sagaway server``) over gRPC.

The application keeps its workflow code, workers and recovery; the server holds the database
and applies each verb in one transaction there, with the same fencing and group commit as an
embedded store. Wake-ups come back on a server stream (``Watch``), re-opened when it breaks.

A call the server cannot answer (down, restarting, unreachable) raises ``StoreUnavailable``,
like a database outage: the engine treats it the same way (a workflow resumes from its last
record once the server is back).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence

from sagaway import states
from sagaway.states import WorkflowStatus
from sagaway.store.contract import CreateResult, StoreUnavailable
from sagaway.store.records import (
    AttemptErrorRecord,
    AuditNote,
    AuditQuery,
    AuditRecord,
    CancelRequestRecord,
    ForkPayloads,
    Lease,
    ListQuery,
    NewWorkflow,
    ScheduleRecord,
    SignalRecord,
    StepRecord,
    WorkflowRecord,
)
from sagaway.store.remote import errors as _grpc_errors
from sagaway.store.remote import wire
from sagaway.store.remote.connection import Connection, created_of, int32, workflow_of, workflows_of
from sagaway.store.remote.errors import ServerRefused
from sagaway.v1 import engine_pb2 as pb

__all__ = ["GrpcStore", "ServerRefused"]

_SIGNAL_ROUNDS = 5
"""ReceiveSignal round trips before giving up on deciding new payloads (each round decides
every payload pending then; more rounds happen only while new signals keep arriving)."""


class GrpcStore(Connection):
    """The Store contract, answered by an Engine Server at ``grpc://host:port``."""

    # ------------------------------------------------------------------ workflows

    async def create_workflow(
        self,
        new: NewWorkflow,
        *,
        now: float,
        lease: Lease | None,
        replace_live: bool,
        audit: AuditNote | None = None,
    ) -> CreateResult:
        request = pb.CreateWorkflowRequest(
            new=wire.new_workflow(new),
            now=now,
            lease=wire.lease(lease) if lease else None,
            replace_live=replace_live,
            audit=wire.audit_note(audit),
        )
        return created_of(await self._call("CreateWorkflow", request))

    async def fork_workflow(
        self,
        source_run_id: str,
        *,
        run_id: str,
        key: str,
        key_space: str,
        call_ids: Collection[str],
        now: float,
        code_version: str | None = None,
        payloads: ForkPayloads | None = None,
        audit: AuditNote | None = None,
    ) -> CreateResult | None:
        request = pb.ForkWorkflowRequest(
            source_run_id=source_run_id,
            run_id=run_id,
            key=key,
            key_space=key_space,
            call_ids=list(call_ids),
            now=now,
            code_version=code_version,
            payloads=None if payloads is None else wire.fork_payloads(payloads),
            audit=wire.audit_note(audit),
        )
        largest = self.server_info.max_request_bytes if self.server_info else 0
        _grpc_errors.check_fork_size(request, largest, source_run_id)
        reply = await self._call("ForkWorkflow", request)
        return created_of(reply.result) if reply.HasField("result") else None

    async def get_workflow(self, key: str) -> WorkflowRecord | None:
        return workflow_of(await self._call("GetWorkflow", pb.KeyRequest(key=key)))

    async def get_run(self, run_id: str) -> WorkflowRecord | None:
        return workflow_of(await self._call("GetRun", pb.RunRequest(run_id=run_id)))

    async def list_workflows(
        self, *, status: WorkflowStatus | None, limit: int
    ) -> list[WorkflowRecord]:
        request = pb.ListWorkflowsRequest(
            status=status.value if status else None, limit=int32(limit)
        )
        return workflows_of(await self._call("ListWorkflows", request))

    async def load_steps(self, run_id: str) -> list[StepRecord]:
        reply = await self._call("LoadSteps", pb.RunRequest(run_id=run_id))
        return [wire.from_message(StepRecord, s) for s in reply.steps]

    async def load_steps_many(self, run_ids: Collection[str]) -> dict[str, list[StepRecord]]:
        reply = await self._call("LoadStepsMany", pb.RunIds(run_ids=list(run_ids)))
        return {
            run_id: [wire.from_message(StepRecord, s) for s in steps.steps]
            for run_id, steps in reply.steps.items()
        }

    async def record_step(self, step: StepRecord, *, token: str) -> None:
        await self._call("RecordStep", pb.RecordStepRequest(step=wire.step(step), token=token))

    async def finish_workflow(
        self,
        run_id: str,
        *,
        token: str,
        status: WorkflowStatus,
        result: str | None,
        error: str | None,
        now: float,
        final_step: StepRecord | None = None,
        has_parent: bool = True,
        cancel_seen: bool = False,
    ) -> None:
        request = pb.FinishWorkflowRequest(
            run_id=run_id,
            token=token,
            status=status.value,
            result=result,
            error=error,
            now=now,
            final_step=wire.step(final_step) if final_step else None,
            has_parent=has_parent,
            cancel_seen=cancel_seen,
        )
        await self._call("FinishWorkflow", request)

    async def suspend_workflow(
        self, run_id: str, *, token: str, error: str, now: float, next_run_at: float
    ) -> None:
        request = pb.SuspendWorkflowRequest(
            run_id=run_id, token=token, error=error, now=now, next_run_at=next_run_at
        )
        await self._call("SuspendWorkflow", request)

    async def release_workflow(self, run_id: str, *, token: str, now: float) -> None:
        request = pb.ReleaseWorkflowRequest(run_id=run_id, token=token, now=now)
        await self._call("ReleaseWorkflow", request)

    async def renew_leases(self, tokens: Collection[str], *, expires_at: float) -> set[str]:
        request = pb.RenewLeasesRequest(tokens=list(tokens), expires_at=expires_at)
        return set((await self._call("RenewLeases", request)).tokens)

    async def claim_due(
        self,
        *,
        owner: str,
        now: float,
        lease_timeout: float,
        limit: int,
        exclude: Collection[str],
        queues: Collection[str] | None = None,
        versions: Collection[str | None] | None = None,
    ) -> list[tuple[WorkflowRecord, Lease]]:
        request = pb.ClaimDueRequest(
            owner=owner,
            now=now,
            lease_timeout=lease_timeout,
            limit=int32(limit),
            exclude=list(exclude),
            any_queue=queues is None,
            queues=list(queues or ()),
            **wire.version_filter(versions),
        )
        reply = await self._call("ClaimDue", request)
        return [
            (wire.from_message(WorkflowRecord, c.record), wire.from_message(Lease, c.lease))
            for c in reply.claimed
        ]

    async def next_due(
        self,
        *,
        owner: str,
        queues: Collection[str] | None = None,
        versions: Collection[str | None] | None = None,
    ) -> float | None:
        request = pb.NextDueRequest(
            owner=owner,
            any_queue=queues is None,
            queues=list(queues or ()),
            **wire.version_filter(versions),
        )
        return wire.optional(await self._call("NextDue", request), "at")  # type: ignore[no-any-return]

    async def end_workflow(
        self,
        run_id: str,
        *,
        status: WorkflowStatus,
        error: str | None,
        now: float,
        audit: AuditNote | None = None,
    ) -> bool:
        request = pb.EndWorkflowRequest(
            run_id=run_id, status=status.value, error=error, now=now, audit=wire.audit_note(audit)
        )
        return bool((await self._call("EndWorkflow", request)).changed)

    async def request_cancel(
        self, run_id: str, *, reason: str, now: float, audit: AuditNote | None = None
    ) -> bool:
        request = pb.RequestCancelRequest(
            run_id=run_id, reason=reason, now=now, audit=wire.audit_note(audit)
        )
        return bool((await self._call("RequestCancel", request)).changed)

    async def cancel_requests(self, run_ids: Collection[str]) -> dict[str, str]:
        reply = await self._call("CancelRequests", pb.RunIds(run_ids=list(run_ids)))
        return dict(reply.reasons)

    async def retry_now(self, run_id: str, *, now: float, audit: AuditNote | None = None) -> bool:
        request = pb.RetryNowRequest(run_id=run_id, now=now, audit=wire.audit_note(audit))
        return bool((await self._call("RetryNow", request)).changed)

    async def count_by_status(self) -> dict[WorkflowStatus, int]:
        reply = await self._call("CountByStatus", pb.CountByStatusRequest())
        return {wire.workflow_status(name): int(n) for name, n in reply.counts.items()}

    # ------------------------------------------------------------------ waits

    async def send_signal(
        self,
        key: str,
        *,
        name: str,
        payload: str,
        dedupe_id: str | None,
        now: float,
        run_id: str | None = None,
        audit: AuditNote | None = None,
    ) -> tuple[WorkflowRecord | None, bool]:
        request = pb.SendSignalRequest(
            key=key,
            name=name,
            payload=payload,
            dedupe_id=dedupe_id,
            now=now,
            run_id=run_id,
            audit=wire.audit_note(audit),
        )
        reply = await self._call("SendSignal", request)
        return workflow_of(reply), bool(reply.stored)

    async def receive_signal(
        self,
        run_id: str,
        *,
        token: str,
        name: str,
        call_id: str,
        started_at: float,
        deadline: float | None,
        wait: bool,
        accept: Callable[[str], str | None],
        now: float,
    ) -> str | None:
        request = pb.ReceiveSignalRequest(
            run_id=run_id,
            token=token,
            name=name,
            call_id=call_id,
            started_at=started_at,
            deadline=deadline,
            wait=wait,
            now=now,
        )
        for _ in range(_SIGNAL_ROUNDS):
            reply = await self._call("ReceiveSignal", request)
            if not reply.undecided:
                return wire.optional(reply, "payload")  # type: ignore[no-any-return]
            for payload in reply.undecided:
                request.decisions[payload] = accept(payload) or ""
        raise StoreUnavailable(
            f"signals {name!r} kept arriving faster than they could be judged; will try again"
        )

    async def wait_workflow(
        self,
        run_id: str,
        *,
        token: str,
        waiting_for: str,
        next_run_at: float | None,
        step: StepRecord | None,
        now: float,
    ) -> None:
        request = pb.WaitWorkflowRequest(
            run_id=run_id,
            token=token,
            waiting_for=waiting_for,
            next_run_at=next_run_at,
            step=wire.step(step) if step else None,
            now=now,
        )
        await self._call("WaitWorkflow", request)

    async def wait_for_child(
        self, run_id: str, *, token: str, child_key: str, wait: bool, now: float
    ) -> WorkflowRecord | None:
        request = pb.WaitForChildRequest(
            run_id=run_id, token=token, child_key=child_key, wait=wait, now=now
        )
        return workflow_of(await self._call("WaitForChild", request))

    async def list_cancel_requests(self, run_id: str) -> list[CancelRequestRecord]:
        reply = await self._call("ListCancelRequests", pb.RunRequest(run_id=run_id))
        return [wire.from_message(CancelRequestRecord, r) for r in reply.requests]

    async def list_signals(self, run_id: str) -> list[SignalRecord]:
        reply = await self._call("ListSignals", pb.RunRequest(run_id=run_id))
        return [wire.from_message(SignalRecord, s) for s in reply.signals]

    # ------------------------------------------------------------------ retention, inspection

    async def purge_ended(
        self, *, before: float, statuses: Collection[WorkflowStatus] | None, limit: int
    ) -> list[str]:
        # Checked here as the embedded stores do: on the wire an empty list means "every
        # ended status", which [] (no status at all) is not.
        names = [s.value for s in states.ended_statuses(statuses)]
        request = pb.PurgeEndedRequest(before=before, statuses=names, limit=int32(limit))
        return list((await self._call("PurgeEnded", request)).run_ids)

    async def count_purgeable(
        self, *, before: float, statuses: Collection[WorkflowStatus] | None
    ) -> int:
        names = [s.value for s in states.ended_statuses(statuses)]
        request = pb.CountPurgeableRequest(before=before, statuses=names)
        return int((await self._call("CountPurgeable", request)).count)

    async def acquire_queue_slot(
        self,
        queue: str,
        *,
        holder: str,
        concurrency: int | None,
        rate_per_second: float | None,
        expires_at: float,
        now: float,
    ) -> float | None:
        request = pb.AcquireQueueSlotRequest(
            queue=queue,
            holder=holder,
            concurrency=concurrency,
            rate_per_second=rate_per_second,
            expires_at=expires_at,
            now=now,
        )
        reply = await self._call("AcquireQueueSlot", request)
        return wire.optional(reply, "retry_at")  # type: ignore[no-any-return]

    async def renew_queue_slot(
        self, queue: str, *, holder: str, expires_at: float, now: float
    ) -> bool:
        request = pb.RenewQueueSlotRequest(
            queue=queue, holder=holder, expires_at=expires_at, now=now
        )
        return bool((await self._call("RenewQueueSlot", request)).changed)

    async def release_queue_slot(self, queue: str, *, holder: str, now: float) -> None:
        request = pb.ReleaseQueueSlotRequest(queue=queue, holder=holder, now=now)
        await self._call("ReleaseQueueSlot", request)

    async def list_page(self, query: ListQuery) -> list[WorkflowRecord]:
        request = pb.ListPageRequest(
            limit=int32(query.limit),
            statuses=sorted(s.value for s in query.statuses),
            name=query.name,
            key_prefix=query.key_prefix,
            since=query.since,
            until=query.until,
            code_versions=sorted(v for v in query.code_versions if v is not None),
            unversioned=None in query.code_versions,
        )
        if query.after is not None:
            request.after_created_at, request.after_run_id = query.after
        return workflows_of(await self._call("ListPage", request))

    async def list_attempt_errors(self, run_id: str) -> list[AttemptErrorRecord]:
        reply = await self._call("ListAttemptErrors", pb.RunRequest(run_id=run_id))
        return [wire.from_message(AttemptErrorRecord, e) for e in reply.errors]

    # ------------------------------------------------------------------ schedules

    async def put_schedule(
        self,
        schedule: ScheduleRecord,
        *,
        keep_paused: bool,
        now: float,
        audit: AuditNote | None = None,
    ) -> ScheduleRecord:
        request = pb.PutScheduleRequest(
            schedule=wire.schedule(schedule),
            keep_paused=keep_paused,
            now=now,
            audit=wire.audit_note(audit),
        )
        return wire.from_message(ScheduleRecord, await self._call("PutSchedule", request))

    async def list_schedules(self) -> list[ScheduleRecord]:
        reply = await self._call("ListSchedules", pb.ListSchedulesRequest())
        return [wire.from_message(ScheduleRecord, s) for s in reply.schedules]

    async def set_schedule_paused(
        self,
        schedule_id: str,
        *,
        paused: bool,
        next_tick_at: float,
        now: float,
        audit: AuditNote | None = None,
    ) -> ScheduleRecord | None:
        request = pb.SetSchedulePausedRequest(
            id=schedule_id,
            paused=paused,
            next_tick_at=next_tick_at,
            now=now,
            audit=wire.audit_note(audit),
        )
        reply = await self._call("SetSchedulePaused", request)
        if not reply.HasField("schedule"):
            return None
        return wire.from_message(ScheduleRecord, reply.schedule)

    async def delete_schedule(self, schedule_id: str, *, audit: AuditNote | None = None) -> bool:
        request = pb.ScheduleIdRequest(id=schedule_id, audit=wire.audit_note(audit))
        return bool((await self._call("DeleteSchedule", request)).changed)

    async def fire_schedule(
        self,
        schedule_id: str,
        *,
        tick_at: float,
        next_tick_at: float,
        last_tick_at: float | None,
        starts: Sequence[NewWorkflow],
        now: float,
    ) -> bool:
        request = pb.FireScheduleRequest(
            id=schedule_id,
            tick_at=tick_at,
            next_tick_at=next_tick_at,
            last_tick_at=last_tick_at,
            starts=[wire.new_workflow(new) for new in starts],
            now=now,
        )
        return bool((await self._call("FireSchedule", request)).changed)

    # ------------------------------------------------------------------ audit trail

    async def record_audit(self, note: AuditNote, *, target: str | None = None) -> None:
        request = pb.RecordAuditRequest(audit=wire.audit_note(note), target=target)
        await self._call("RecordAudit", request)

    async def list_audit(self, query: AuditQuery) -> list[AuditRecord]:
        request = pb.ListAuditRequest(
            limit=int32(query.limit),
            before_seq=query.before_seq,
            run_id=query.run_id,
            target=query.target,
            actor=query.actor,
            actions=sorted(query.actions),
            since=query.since,
            until=query.until,
        )
        reply = await self._call("ListAudit", request)
        return [wire.from_message(AuditRecord, e) for e in reply.entries]
