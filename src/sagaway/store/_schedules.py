"""Schedules in the SQL stores: the parameters and rows both dialects share (the verbs:
``sqlite.schedules``, ``postgres.schedules``).

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

from collections.abc import Sequence
from typing import Any, TypeVar

from sagaway.store._rows import Row
from sagaway.store.records import NewWorkflow, ScheduleRecord
from sagaway.store.sql import queries

T = TypeVar("T")
_Q = queries("sqlite")


def put_params(schedule: ScheduleRecord, *, keep_paused: bool, now: float) -> dict[str, Any]:
    """``put_schedule``: the definition, and what to keep of a row already there."""
    return {
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


def advance_params(
    schedule_id: str,
    *,
    tick_at: float,
    next_tick_at: float,
    last_tick_at: float | None,
    starts: Sequence[NewWorkflow],
) -> dict[str, Any]:
    """``advance_schedule``: from ``tick_at`` (as read) to ``next_tick_at``."""
    if len({s.key for s in starts}) != len(starts):
        raise ValueError(f"the executions of schedule {schedule_id!r} need distinct keys")
    if next_tick_at <= tick_at:
        raise ValueError("a schedule's next tick moves forward")
    return {
        "id": schedule_id,
        "tick_at": tick_at,
        "next_tick_at": next_tick_at,
        "last_tick_at": last_tick_at,
    }


def schedule_from_row(row: Row) -> ScheduleRecord:
    """A ``ScheduleRecord`` from the columns of ``list_schedules``."""
    return ScheduleRecord(
        id=row["id"],
        workflow=row["workflow"],
        args=row["args"],
        queue=row["queue"],
        cron=row["cron"],
        timezone=row["timezone"],
        catch_up=row["catch_up"],
        paused=bool(row["paused"]),
        next_tick_at=float(row["next_tick_at"]),
        created_at=float(row["created_at"]),
        updated_at=float(row["updated_at"]),
        last_tick_at=None if row["last_tick_at"] is None else float(row["last_tick_at"]),
    )
