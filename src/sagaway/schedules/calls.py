"""The Manager's schedule calls: create, list, pause, resume, trigger and delete schedules.

An operator's changes go through these (the command line and the console too); each one is
recorded in the audit trail with its ``reason``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from sagaway._engine import audit
from sagaway._engine.engine import EngineRef
from sagaway.registry import WorkflowDef
from sagaway.schedules import ticks
from sagaway.store.records import ScheduleRecord
from sagaway.workflow import WorkflowHandle


class ScheduleCalls:
    """Schedule operations on the engine the Manager has open (``ref``)."""

    def __init__(self, ref: EngineRef) -> None:
        self._ref = ref

    async def schedule(
        self,
        schedule_id: str,
        workflow: Callable[..., Any] | str,
        cron: str,
        *,
        args: Sequence[Any] = (),
        kwargs: Mapping[str, Any] | None = None,
        timezone: str = "UTC",
        catch_up: str = "one",
        paused: bool = False,
        reason: str | None = None,
    ) -> ScheduleRecord:
        """Create the schedule ``schedule_id`` or replace its definition: ``workflow`` (a
        registered function or name) with these arguments at each tick of ``cron`` read in
        ``timezone``; ``catch_up`` ("skip", "one", "all") says what runs of the ticks missed
        while no worker ran. Same expression and zone: the next tick is kept. Recorded in the
        audit trail, with ``reason``, as are pause, resume, trigger and delete."""
        engine = self._ref.require()
        defn: WorkflowDef = engine.registry.workflow(workflow)
        args_json = defn.codec.encode_args(tuple(args), dict(kwargs or {}), engine.payload_limit)
        record = ticks.definition(
            engine,
            schedule_id,
            defn,
            args_json,
            cron_expr=cron,
            timezone=timezone,
            catch_up=catch_up,
            paused=paused,
        )
        note = audit.note(
            "schedule.put", reason, workflow=defn.name, cron=cron, paused=paused or None
        )
        return await ticks.put(engine, record, keep_paused=False, audit_note=note)

    async def list_schedules(self) -> list[ScheduleRecord]:
        """Every schedule in the database, by id."""
        return await self._ref.require().store.list_schedules()

    async def pause_schedule(
        self, schedule_id: str, *, reason: str | None = None
    ) -> ScheduleRecord:
        """Stop starting executions (``ScheduleNotFound`` for an unknown id)."""
        engine = self._ref.require()
        return await ticks.set_paused(engine, schedule_id, paused=True, reason=reason)

    async def resume_schedule(
        self, schedule_id: str, *, reason: str | None = None
    ) -> ScheduleRecord:
        """Start executions again from the next tick (ticks of the pause are not run)."""
        engine = self._ref.require()
        return await ticks.set_paused(engine, schedule_id, paused=False, reason=reason)

    async def trigger_schedule(
        self, schedule_id: str, *, reason: str | None = None
    ) -> WorkflowHandle[Any]:
        """Start one execution now, under ``schedule:<id>:manual:<uuid>``."""
        record = await ticks.trigger(self._ref.require(), schedule_id, reason)
        return WorkflowHandle(self._ref, record.key)

    async def delete_schedule(self, schedule_id: str, *, reason: str | None = None) -> None:
        """Delete the schedule (its executions stay)."""
        await ticks.delete(self._ref.require(), schedule_id, reason)
