"""The verbs both SQL stores hand to collaborators (schedules, audit trail, queue limits): each
dialect builds its three (given its way to run a transaction) and this class calls them, so the
forwarding is written once for both."""

from __future__ import annotations

from collections.abc import Sequence

from sagaway.store.contract import AuditVerbs, QueueLimitVerbs, ScheduleVerbs
from sagaway.store.records import AuditNote, AuditQuery, AuditRecord, NewWorkflow, ScheduleRecord


class Collaborators:
    """Forwards the schedule, audit and queue limit verbs of a store to its collaborators."""

    def __init__(
        self, *, schedules: ScheduleVerbs, audit: AuditVerbs, queue_limits: QueueLimitVerbs
    ) -> None:
        self._schedules = schedules
        self._audit = audit
        self._queue_limits = queue_limits

    async def put_schedule(
        self,
        schedule: ScheduleRecord,
        *,
        keep_paused: bool,
        now: float,
        audit: AuditNote | None = None,
    ) -> ScheduleRecord:
        return await self._schedules.put_schedule(
            schedule, keep_paused=keep_paused, now=now, audit=audit
        )

    async def list_schedules(self) -> list[ScheduleRecord]:
        return await self._schedules.list_schedules()

    async def set_schedule_paused(
        self,
        schedule_id: str,
        *,
        paused: bool,
        next_tick_at: float,
        now: float,
        audit: AuditNote | None = None,
    ) -> ScheduleRecord | None:
        return await self._schedules.set_schedule_paused(
            schedule_id, paused=paused, next_tick_at=next_tick_at, now=now, audit=audit
        )

    async def delete_schedule(self, schedule_id: str, *, audit: AuditNote | None = None) -> bool:
        return await self._schedules.delete_schedule(schedule_id, audit=audit)

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
        return await self._schedules.fire_schedule(
            schedule_id,
            tick_at=tick_at,
            next_tick_at=next_tick_at,
            last_tick_at=last_tick_at,
            starts=starts,
            now=now,
        )

    async def record_audit(self, note: AuditNote, *, target: str | None = None) -> None:
        await self._audit.record_audit(note, target=target)

    async def list_audit(self, query: AuditQuery) -> list[AuditRecord]:
        return await self._audit.list_audit(query)

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
        return await self._queue_limits.acquire_queue_slot(
            queue,
            holder=holder,
            concurrency=concurrency,
            rate_per_second=rate_per_second,
            expires_at=expires_at,
            now=now,
        )

    async def renew_queue_slot(
        self, queue: str, *, holder: str, expires_at: float, now: float
    ) -> bool:
        return await self._queue_limits.renew_queue_slot(
            queue, holder=holder, expires_at=expires_at, now=now
        )

    async def release_queue_slot(self, queue: str, *, holder: str, now: float) -> None:
        await self._queue_limits.release_queue_slot(queue, holder=holder, now=now)
