"""Schedules in the SQL stores: the verbs' parameters and rows both dialects share
(``SQLSchedules``; the transactions: ``sqlite.schedules``, ``postgres.schedules``).

A schedule row holds its definition and ``next_tick_at``, the earliest tick not started yet.
``fire_schedule`` is the one verb that makes schedules run exactly once per tick: in one
transaction it advances ``next_tick_at`` from the value the scheduler read (a compare-and-set:
of several schedulers that read the same value, one changes the row, the others change nothing)
and, only if it won, inserts the executions of the ticks, each under a key derived from the tick
(an execution already under that key is left as it is). The verbs are in ``sqlite.schedules``
and ``postgres.schedules``; the rules (which ticks, which keys) are the engine's
(``_engine/schedules``).
"""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Sequence
from typing import Any, TypeVar

from sagaway.store._rows import Row, from_columns
from sagaway.store.records import (
    AuditNote,
    NewWorkflow,
    ScheduleFire,
    SchedulePause,
    SchedulePut,
    ScheduleRecord,
)
from sagaway.store.sql import queries

T = TypeVar("T")
_Q = queries("sqlite")
Params = dict[str, Any]


class SQLSchedules(abc.ABC):
    """The schedule verbs of both SQL stores: each builds its statement's parameters here and
    hands them to the dialect's hook (``_put``, ``_set_paused``, ``_fire``), which runs the
    transaction."""

    @abc.abstractmethod
    async def _put(self, params: Params, audit: AuditNote | None) -> ScheduleRecord:
        """``put_schedule``: ``put_schedule`` with ``params``, the entry, the row as stored."""

    @abc.abstractmethod
    async def _set_paused(self, params: Params, audit: AuditNote | None) -> ScheduleRecord | None:
        """``set_schedule_paused``: the update, the row (None: no such id), the entry."""

    @abc.abstractmethod
    async def _fire(self, params: Params, starts: Sequence[NewWorkflow], now: float) -> bool:
        """``fire_schedule``: ``advance_schedule`` with ``params``; if it won, the inserts."""

    @abc.abstractmethod
    async def list_schedules(self) -> list[ScheduleRecord]:
        """See ``Store.list_schedules``."""

    @abc.abstractmethod
    async def delete_schedule(self, schedule_id: str, *, audit: AuditNote | None = None) -> bool:
        """See ``Store.delete_schedule``."""

    async def put_schedule(
        self, put: SchedulePut, *, now: float, audit: AuditNote | None = None
    ) -> ScheduleRecord:
        # The definition, and what to keep of a row already there.
        schedule, keep_paused = put.schedule, put.keep_paused
        params = {
            "id": schedule.id,
            "workflow": schedule.workflow,
            "args": schedule.args,
            "queue": schedule.queue,
            "cron": schedule.cron,
            "timezone": schedule.timezone,
            "catch_up": schedule.catch_up,
            "paused": schedule.paused,
            "next_tick_at": schedule.next_tick_at,
            "keep_paused": keep_paused,
            "now": now,
        }
        return await self._put(params, audit)

    async def set_schedule_paused(
        self, change: SchedulePause, *, now: float, audit: AuditNote | None = None
    ) -> ScheduleRecord | None:
        params = {**_fields(change), "now": now}
        return await self._set_paused(params, audit)

    async def fire_schedule(self, fire: ScheduleFire, *, now: float) -> bool:
        if len({s.key for s in fire.starts}) != len(fire.starts):
            raise ValueError(f"the executions of schedule {fire.id!r} need distinct keys")
        if fire.next_tick_at <= fire.tick_at:
            raise ValueError("a schedule's next tick moves forward")
        # ``advance_schedule``: from ``tick_at`` (as read) to ``next_tick_at``.
        params = _fields(fire)
        del params["starts"]
        return await self._fire(params, fire.starts, now)


def _fields(record: Any) -> Params:
    """A record's fields by name (not deep, as ``dataclasses.asdict`` is)."""
    return {f.name: getattr(record, f.name) for f in dataclasses.fields(record)}


def schedule_from_row(row: Row) -> ScheduleRecord:
    """A ``ScheduleRecord`` from the columns of ``list_schedules``."""
    last = row["last_tick_at"]
    return from_columns(
        ScheduleRecord,
        row,
        paused=bool(row["paused"]),
        next_tick_at=float(row["next_tick_at"]),
        created_at=float(row["created_at"]),
        updated_at=float(row["updated_at"]),
        last_tick_at=None if last is None else float(last),
    )
