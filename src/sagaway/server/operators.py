"""The Engine service's operator verbs: retention, inspection, schedules, the audit trail and
cluster queue limits (the workflows' own verbs are ``service``'s)."""

from __future__ import annotations

from typing import Any

from sagaway._engine import cron
from sagaway._engine.text_checks import check_name, check_plain
from sagaway.server.verbs import (
    ServiceBase,
    text_of,
    verb,
)
from sagaway.store import notices
from sagaway.store.records import (
    AuditQuery,
    ListQuery,
    NewWorkflow,
    ScheduleRecord,
)
from sagaway.store.remote import wire
from sagaway.v1 import engine_pb2 as pb


class OperatorService(ServiceBase):
    """Handlers of the operator verbs, over the store of ``ServiceBase``."""

    # ------------------------------------------------------------------ retention, inspection

    @verb
    async def PurgeEnded(self, request: pb.PurgeEndedRequest, context: Any) -> pb.RunIds:
        statuses = [wire.workflow_status(s) for s in request.statuses] or None
        run_ids = await self.store.purge_ended(
            before=request.before, statuses=statuses, limit=request.limit
        )
        return pb.RunIds(run_ids=run_ids)

    @verb
    async def CountPurgeable(self, request: pb.CountPurgeableRequest, context: Any) -> pb.Count:
        statuses = [wire.workflow_status(s) for s in request.statuses] or None
        return pb.Count(
            count=await self.store.count_purgeable(before=request.before, statuses=statuses)
        )

    @verb
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

    @verb
    async def ListAttemptErrors(self, request: pb.RunRequest, context: Any) -> pb.AttemptErrors:
        found = await self.store.list_attempt_errors(request.run_id)
        return pb.AttemptErrors(errors=[wire.attempt_error(e) for e in found])

    # ------------------------------------------------------------------ schedules

    @verb
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

    @verb
    async def ListSchedules(self, request: pb.ListSchedulesRequest, context: Any) -> pb.Schedules:
        found = await self.store.list_schedules()
        return pb.Schedules(schedules=[wire.schedule(s) for s in found])

    @verb
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

    @verb
    async def DeleteSchedule(self, request: pb.ScheduleIdRequest, context: Any) -> pb.Done:
        deleted = await self.store.delete_schedule(
            request.id, audit=self._note(request, "schedule.delete")
        )
        return pb.Done(changed=deleted)

    # ------------------------------------------------------------------ audit trail

    @verb
    async def RecordAudit(self, request: pb.RecordAuditRequest, context: Any) -> pb.Empty:
        note = self._note(request, "purge")
        if note is None:
            raise ValueError("RecordAudit needs its audit note")
        await self.store.record_audit(note, target=wire.optional(request, "target"))
        return pb.Empty()

    @verb
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

    @verb
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

    @verb
    async def AcquireQueueSlot(
        self, request: pb.AcquireQueueSlotRequest, context: Any
    ) -> pb.AcquireQueueSlotReply:
        now = self.clock.now(request.now)
        retry_at = await self.store.acquire_queue_slot(
            text_of(request.queue, "queue"),
            holder=text_of(request.holder, "holder"),
            concurrency=wire.optional(request, "concurrency"),
            rate_per_second=wire.optional(request, "rate_per_second"),
            expires_at=self.clock.expires_at(request.expires_at, now),
            now=now,
        )
        return pb.AcquireQueueSlotReply(retry_at=retry_at)

    @verb
    async def RenewQueueSlot(self, request: pb.RenewQueueSlotRequest, context: Any) -> pb.Done:
        now = self.clock.now(request.now)
        renewed = await self.store.renew_queue_slot(
            request.queue,
            holder=request.holder,
            expires_at=self.clock.expires_at(request.expires_at, now),
            now=now,
        )
        return pb.Done(changed=renewed)

    @verb
    async def ReleaseQueueSlot(self, request: pb.ReleaseQueueSlotRequest, context: Any) -> pb.Empty:
        await self.store.release_queue_slot(
            request.queue, holder=request.holder, now=self.clock.now(request.now)
        )
        self._ready()
        return pb.Empty()
