"""The Manager's schedule methods, and schedules declared at registration.

``@manager.register_workflow(schedule="*/5 * * * *")`` declares a schedule (``ScheduleSpec``);
a Manager that runs workers writes it into the database when it opens (creating it, or updating
its definition: an operator's pause stays). ``manager.schedule(...)`` does the same at run time.
Every worker process runs a ``Scheduler``; each tick starts one execution however many run.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from sagaway._engine import audit, cron
from sagaway._engine import schedules as ops
from sagaway._engine.engine import Engine
from sagaway.registry import Registry, WorkflowDef, default_name
from sagaway.scheduler import Scheduler
from sagaway.store.records import ScheduleRecord
from sagaway.workflow import WorkflowHandle


@dataclasses.dataclass(frozen=True, slots=True)
class ScheduleSpec:
    """A schedule declared with ``register_workflow(schedule=...)``."""

    schedule_id: str
    workflow: str
    cron: str
    timezone: str
    catch_up: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any]


def declare(
    fn: Callable[..., Any],
    name: str | None,
    cron_expr: str | None,
    timezone: str,
    catch_up: str,
    schedule_args: Sequence[Any] | Mapping[str, Any] | None,
    schedule_id: str | None,
) -> ScheduleSpec | None:
    """A checked ``ScheduleSpec`` of the workflow ``fn`` registered as ``name`` (its default
    name if None); None without a cron expression."""
    if cron_expr is None:
        return None
    name = name or default_name(fn)
    cron.check(cron_expr, timezone, catch_up)
    if isinstance(schedule_args, Mapping):
        args: tuple[Any, ...] = ()
        kwargs = dict(schedule_args)
    else:
        args, kwargs = tuple(schedule_args or ()), {}
    try:
        inspect.signature(fn).bind(*args, **kwargs)
    except TypeError as exc:
        raise ValueError(
            f"workflow {name!r} is scheduled but its arguments do not fit ({exc}): a schedule "
            "starts it with schedule_args (none given means no arguments)"
        ) from None
    return ScheduleSpec(schedule_id or name, name, cron_expr, timezone, catch_up, args, kwargs)


async def put_declared(engine: Engine, specs: Sequence[ScheduleSpec]) -> None:
    """Write the declared schedules (at open): new ones are created, others updated."""
    for spec in specs:
        defn = engine.registry.workflow(spec.workflow)
        args_json = defn.codec.encode_args(spec.args, spec.kwargs, engine.payload_limit)
        record = ops.definition(
            engine,
            spec.schedule_id,
            defn,
            args_json,
            cron_expr=spec.cron,
            timezone=spec.timezone,
            catch_up=spec.catch_up,
            paused=False,
        )
        await ops.put(engine, record, keep_paused=True)


class ScheduleMethods:
    """``Manager``'s schedule methods (a mixin: the Manager gives the engine and registry)."""

    registry: Registry
    _scheduler: Scheduler | None
    _declared: list[ScheduleSpec]
    """Schedules of ``register_workflow(schedule=...)``, written when workers open."""

    def _require_engine(self) -> Engine:
        raise NotImplementedError  # Manager's

    async def close(self) -> None:
        raise NotImplementedError  # Manager's

    @property
    def scheduler(self) -> Scheduler | None:
        """This process's scheduler while the Manager runs workers (None otherwise)."""
        return self._scheduler

    async def _write_declared(self, engine: Engine) -> None:
        try:
            await put_declared(engine, self._declared)
        except BaseException:
            await self.close()
            raise

    def _start_scheduler(self, engine: Engine) -> None:
        self._scheduler = Scheduler(engine)
        self._scheduler.start()

    async def _stop_scheduler(self) -> None:
        scheduler, self._scheduler = self._scheduler, None
        if scheduler is not None:
            await scheduler.stop()

    def get_workflow(self, key: str) -> WorkflowHandle[Any]:
        raise NotImplementedError  # Manager's

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
        engine = self._require_engine()
        defn: WorkflowDef = self.registry.workflow(workflow)
        args_json = defn.codec.encode_args(tuple(args), dict(kwargs or {}), engine.payload_limit)
        record = ops.definition(
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
        return await ops.put(engine, record, keep_paused=False, audit_note=note)

    async def list_schedules(self) -> list[ScheduleRecord]:
        """Every schedule in the database, by id."""
        return await self._require_engine().store.list_schedules()

    async def pause_schedule(
        self, schedule_id: str, *, reason: str | None = None
    ) -> ScheduleRecord:
        """Stop starting executions (``ScheduleNotFound`` for an unknown id)."""
        engine = self._require_engine()
        return await ops.set_paused(engine, schedule_id, paused=True, reason=reason)

    async def resume_schedule(
        self, schedule_id: str, *, reason: str | None = None
    ) -> ScheduleRecord:
        """Start executions again from the next tick (ticks of the pause are not run)."""
        engine = self._require_engine()
        return await ops.set_paused(engine, schedule_id, paused=False, reason=reason)

    async def trigger_schedule(
        self, schedule_id: str, *, reason: str | None = None
    ) -> WorkflowHandle[Any]:
        """Start one execution now, under ``schedule:<id>:manual:<uuid>``."""
        record = await ops.trigger(self._require_engine(), schedule_id, reason)
        return self.get_workflow(record.key)

    async def delete_schedule(self, schedule_id: str, *, reason: str | None = None) -> None:
        """Delete the schedule (its executions stay)."""
        await ops.delete(self._require_engine(), schedule_id, reason)
