"""Schedules on SQLite: the schedule transactions, each one job of the writer (the verbs, their
parameters and rows are shared: ``store._schedules``; ``fire_schedule``'s compare-and-set is
described there)."""

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


class Schedules(_schedules.SQLSchedules):
    """The schedule transactions of ``SQLiteStore``: each is one job of its writer (``call``)."""

    def __init__(self, call: Call) -> None:
        self._call = call

    async def _put(self, params: dict[str, Any], audit: AuditNote | None) -> ScheduleRecord:
        def op(conn: sqlite3.Connection) -> ScheduleRecord:
            conn.execute(_Q["put_schedule"], params)
            audit_entry(conn, audit, target=params["id"])
            stored = _get(conn, params["id"])
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

    async def _set_paused(
        self, params: dict[str, Any], audit: AuditNote | None
    ) -> ScheduleRecord | None:
        def op(conn: sqlite3.Connection) -> ScheduleRecord | None:
            conn.execute(_Q["set_schedule_paused"], params)
            stored = _get(conn, params["id"])
            if stored is not None:
                audit_entry(conn, audit, target=params["id"])
            return stored

        return await self._call(op)

    async def delete_schedule(self, schedule_id: str, *, audit: AuditNote | None = None) -> bool:
        def op(conn: sqlite3.Connection) -> bool:
            if conn.execute(_Q["delete_schedule"], {"id": schedule_id}).rowcount != 1:
                return False
            audit_entry(conn, audit, target=schedule_id)
            return True

        return await self._call(op)

    async def _fire(
        self, params: dict[str, Any], starts: Sequence[NewWorkflow], now: float
    ) -> bool:
        return await self._call(lambda conn: _fire(conn, params, starts, now))
