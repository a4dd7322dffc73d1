"""Schedules on PostgreSQL (see ``_schedules``): the same verbs, each one transaction.

``fire_schedule``'s compare-and-set is one ``UPDATE ... WHERE next_tick_at = <as read>``: two
schedulers updating the same row serialise on its row lock, and the second finds the value
changed and updates nothing. A transaction retried after a lost acknowledgement (``retried``)
may find that its own first attempt won: it then inserts the executions again, which changes
nothing if they are there (their keys are taken).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

from sagaway.store import _params
from sagaway.store._schedules import advance_params, put_params, schedule_from_row
from sagaway.store.postgres import audit as _pg_audit
from sagaway.store.postgres.conn import Conn, Q, Run, named
from sagaway.store.records import AuditNote, NewWorkflow, ScheduleRecord

T = TypeVar("T")


async def _get(conn: Conn, schedule_id: str) -> ScheduleRecord | None:
    rows = await named(conn, "get_schedule", {"id": schedule_id})
    return schedule_from_row(rows[0]) if rows else None


async def _fire(
    conn: Conn,
    retried: bool,
    params: dict[str, Any],
    starts: Sequence[NewWorkflow],
    now: float,
) -> bool:
    cur = await conn.execute(Q["advance_schedule"], params)
    if cur.rowcount != 1:
        current = await _get(conn, params["id"]) if retried else None
        if current is None or current.next_tick_at != params["next_tick_at"]:
            return False
    for new in starts:
        await conn.execute(Q["insert_workflow"], _params.create(new, now=now, lease=None))
    return True


class Schedules:
    """The schedule verbs of ``PostgresStore`` (a collaborator given the store's ``_run``)."""

    def __init__(self, run: Run) -> None:
        self._run = run

    async def put_schedule(
        self,
        schedule: ScheduleRecord,
        *,
        keep_paused: bool,
        now: float,
        audit: AuditNote | None = None,
    ) -> ScheduleRecord:
        params = put_params(schedule, keep_paused=keep_paused, now=now)

        async def op(conn: Conn, retried: bool) -> ScheduleRecord:
            await conn.execute(Q["put_schedule"], params)
            await _pg_audit.write(conn, audit, target=schedule.id)
            stored = await _get(conn, schedule.id)
            assert stored is not None
            return stored

        return await self._run(op)

    async def list_schedules(self) -> list[ScheduleRecord]:
        async def op(conn: Conn, retried: bool) -> list[ScheduleRecord]:
            return [schedule_from_row(r) for r in await named(conn, "list_schedules", {})]

        return await self._run(op, transaction=False)

    async def set_schedule_paused(
        self,
        schedule_id: str,
        *,
        paused: bool,
        next_tick_at: float,
        now: float,
        audit: AuditNote | None = None,
    ) -> ScheduleRecord | None:
        params = {"id": schedule_id, "paused": paused, "next_tick_at": next_tick_at, "now": now}

        async def op(conn: Conn, retried: bool) -> ScheduleRecord | None:
            await conn.execute(Q["set_schedule_paused"], params)
            stored = await _get(conn, schedule_id)
            if stored is not None:
                await _pg_audit.write(conn, audit, target=schedule_id)
            return stored

        return await self._run(op)

    async def delete_schedule(self, schedule_id: str, *, audit: AuditNote | None = None) -> bool:
        async def op(conn: Conn, retried: bool) -> bool:
            cur = await conn.execute(Q["delete_schedule"], {"id": schedule_id})
            if cur.rowcount != 1:
                return False
            await _pg_audit.write(conn, audit, target=schedule_id)
            return True

        return await self._run(op)

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
        params = advance_params(
            schedule_id,
            tick_at=tick_at,
            next_tick_at=next_tick_at,
            last_tick_at=last_tick_at,
            starts=starts,
        )

        async def op(conn: Conn, retried: bool) -> bool:
            return await _fire(conn, retried, params, starts, now)

        return await self._run(op)
