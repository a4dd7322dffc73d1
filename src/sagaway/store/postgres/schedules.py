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
from sagaway.store._schedules import SQLSchedules, schedule_from_row
from sagaway.store.postgres import audit as _pg_audit
from sagaway.store.postgres.conn import Conn, Params, Q, Run, named
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


class Schedules(SQLSchedules):
    """The schedule transactions of ``PostgresStore`` (a collaborator given the store's
    ``_run``; the verbs: ``SQLSchedules``)."""

    def __init__(self, run: Run) -> None:
        self._run = run

    async def _put(self, params: Params, audit: AuditNote | None) -> ScheduleRecord:
        async def op(conn: Conn, retried: bool) -> ScheduleRecord:
            await conn.execute(Q["put_schedule"], params)
            await _pg_audit.write(conn, audit, target=params["id"])
            stored = await _get(conn, params["id"])
            assert stored is not None
            return stored

        return await self._run(op)

    async def list_schedules(self) -> list[ScheduleRecord]:
        async def op(conn: Conn, retried: bool) -> list[ScheduleRecord]:
            return [schedule_from_row(r) for r in await named(conn, "list_schedules", {})]

        return await self._run(op, transaction=False)

    async def _set_paused(self, params: Params, audit: AuditNote | None) -> ScheduleRecord | None:
        async def op(conn: Conn, retried: bool) -> ScheduleRecord | None:
            await conn.execute(Q["set_schedule_paused"], params)
            stored = await _get(conn, params["id"])
            if stored is not None:
                await _pg_audit.write(conn, audit, target=params["id"])
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

    async def _fire(self, params: Params, starts: Sequence[NewWorkflow], now: float) -> bool:
        async def op(conn: Conn, retried: bool) -> bool:
            return await _fire(conn, retried, params, starts, now)

        return await self._run(op)
