"""Schedules on SQLite: the schedule verbs, each one job of the writer (the parameters and rows
are shared: ``store._schedules``; ``fire_schedule``'s compare-and-set is described there)."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from sagaway.store import _params, _schedules
from sagaway.store.records import AuditNote, NewWorkflow, ScheduleRecord
from sagaway.store.sql import queries
from sagaway.store.sqlite.audit import write as audit_entry
from sagaway.store.sqlite.jobs import Call

_Q = queries("sqlite")


def _get(conn: sqlite3.Connection, schedule_id: str) -> ScheduleRecord | None:
    row = conn.execute(_Q["get_schedule"], {"id": schedule_id}).fetchone()
    return _schedules.schedule_from_row(row) if row is not None else None


def _fire(
    conn: sqlite3.Connection, params: dict[str, Any], starts: Sequence[NewWorkflow], now: float
) -> bool:
    if conn.execute(_Q["advance_schedule"], params).rowcount != 1:
        return False
    for new in starts:
        conn.execute(_Q["insert_workflow"], _params.create(new, now=now, lease=None)).fetchall()
    return True


class Schedules:
    """The schedule verbs of ``SQLiteStore``: each is one job of its writer (``call``)."""

    def __init__(self, call: Call) -> None:
        self._call = call

    async def put_schedule(
        self,
        schedule: ScheduleRecord,
        *,
        keep_paused: bool,
        now: float,
        audit: AuditNote | None = None,
    ) -> ScheduleRecord:
        params = _schedules.put_params(schedule, keep_paused=keep_paused, now=now)

        def op(conn: sqlite3.Connection) -> ScheduleRecord:
            conn.execute(_Q["put_schedule"], params)
            audit_entry(conn, audit, target=schedule.id)
            stored = _get(conn, schedule.id)
            assert stored is not None
            return stored

        return await self._call(op)

    async def list_schedules(self) -> list[ScheduleRecord]:
        def op(conn: sqlite3.Connection) -> list[ScheduleRecord]:
            return [
                _schedules.schedule_from_row(r)
                for r in conn.execute(_Q["list_schedules"]).fetchall()
            ]

        return await self._call(op)

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

        def op(conn: sqlite3.Connection) -> ScheduleRecord | None:
            conn.execute(_Q["set_schedule_paused"], params)
            stored = _get(conn, schedule_id)
            if stored is not None:
                audit_entry(conn, audit, target=schedule_id)
            return stored

        return await self._call(op)

    async def delete_schedule(self, schedule_id: str, *, audit: AuditNote | None = None) -> bool:
        def op(conn: sqlite3.Connection) -> bool:
            if conn.execute(_Q["delete_schedule"], {"id": schedule_id}).rowcount != 1:
                return False
            audit_entry(conn, audit, target=schedule_id)
            return True

        return await self._call(op)

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
        params = _schedules.advance_params(
            schedule_id,
            tick_at=tick_at,
            next_tick_at=next_tick_at,
            last_tick_at=last_tick_at,
            starts=starts,
        )
        return await self._call(lambda conn: _fire(conn, params, starts, now))
