"""Ticks: which ticks of a schedule start executions, under which keys, exactly once.

Exactly once, however many processes run a scheduler: a tick's execution has a key derived
from the schedule and the tick (``schedule:<id>:<UTC ISO time>``), and it is created in the
same transaction as the compare-and-set that moves the schedule's ``next_tick_at`` past it
(``Store.fire_schedule``). Of the schedulers that read the same ``next_tick_at``, one wins and
creates the executions; the others change nothing. A crash before that commit leaves the tick
due for the next scheduler; a crash after it leaves PENDING executions that any worker claims.
An execution is built as every new one is (``new_executions``): it records the code version of
the process whose scheduler started it, so under ``Manager(version="v2", run_versions={"v2"})``
the workers of v2 run the ticks v2's schedulers start, and it counts in the ``started`` metric.

Ticks missed while no scheduler ran (the cluster was stopped) are caught up by the schedule's
policy: ``skip`` none, ``one`` the latest, ``all`` every one (at most ``cron.MAX_CATCH_UP``, the
latest, oldest first). A tick counts as missed when it came more than ``JOINING`` seconds
before the scheduler that finds it started, or more than ``LATE`` seconds before it is found;
other due ticks are merely late (a busy scheduler, or one that started just as another was
about to fire) and run whatever the policy.

An operator's changes (``manager.schedule``, pause, resume, trigger, delete) are audited; the
schedules a Manager declares at open (``register_workflow(schedule=...)``) and the ticks are
not: they are the application's code at work.
"""

from __future__ import annotations

import dataclasses

from sagaway import _sealed, errors
from sagaway._engine import audit, cron, flow, new_executions
from sagaway._engine.engine import Engine
from sagaway._engine.text_checks import check_key
from sagaway.randomness import new_id
from sagaway.registry import WorkflowDef
from sagaway.store import records
from sagaway.store.records import AuditNote, NewWorkflow, ScheduleRecord, WorkflowRecord

LATE = 60.0
"""Seconds after which a due tick found by a running scheduler counts as missed."""
MAX_ID = 400
"""Characters of a schedule id at most: its executions' keys (at most 512) hold it."""
JOINING = 5.0
"""A scheduler that starts while others run may find a tick they were about to fire: a tick
this little before its start is not counted as missed."""


@dataclasses.dataclass(frozen=True, slots=True)
class Plan:
    """What a scheduler does with a due schedule: start ``ticks`` (oldest first), then wait
    for ``next_tick_at``."""

    ticks: list[float]
    next_tick_at: float


def plan(schedule: ScheduleRecord, *, now: float, started_at: float) -> Plan:
    """The ticks of a due schedule to start now, by its catch-up policy (see the module)."""
    due = cron.ticks_between(
        schedule.cron, schedule.timezone, schedule.next_tick_at, now, cron.MAX_CATCH_UP
    )
    next_at = cron.next_tick(schedule.cron, schedule.timezone, now)
    # Both tests pick the oldest ticks: the missed ones are a prefix of ``due``.
    missed = [t for t in due if t < started_at - JOINING or now - t > LATE]
    on_time = due[len(missed) :]
    if schedule.catch_up == "all":
        return Plan(due, next_at)
    kept = missed[-1:] if schedule.catch_up == "one" else []
    return Plan(kept + on_time, next_at)


def tick_key(schedule_id: str, tick: float) -> str:
    """The key of the execution of one tick: the same in every process."""
    return f"schedule:{schedule_id}:{cron.label(tick)}"


def execution(engine: Engine, schedule: ScheduleRecord, key: str) -> NewWorkflow:
    """A PENDING execution of ``schedule`` under ``key`` (any worker of its queue and of this
    process's code version claims it), built as every new execution is.

    Raises:
        PayloadKeyError: the schedule's arguments could not be opened here (a key this
            process lacks, or sealed for another schedule): sealed for the schedule, they
            would never open in the execution, so none is started.
    """
    if _sealed.is_sealed(schedule.args):
        raise _sealed.sealed_error(schedule.args, f"arguments of schedule {schedule.id!r}")
    registry = engine.registry
    known = schedule.workflow in registry.names()  # its registered priority, if known here
    priority = registry.workflow(schedule.workflow).priority if known else None
    return new_executions.build(
        name=schedule.workflow,
        args_json=schedule.args,
        key=key,
        queue=schedule.queue,
        code_version=engine.options.code_version,
        flow=flow.registered(flow.PLAIN, priority),
    )


async def fire(engine: Engine, schedule: ScheduleRecord, *, started_at: float) -> tuple[Plan, bool]:
    """Start the due ticks of ``schedule``: the plan, and whether this process won them (if
    not, another one did, with the same plan)."""
    now = engine.clock.now()
    chosen = plan(schedule, now=now, started_at=started_at)
    starts = [execution(engine, schedule, tick_key(schedule.id, t)) for t in chosen.ticks]
    won = await engine.store.fire_schedule(
        records.ScheduleFire(
            id=schedule.id,
            tick_at=schedule.next_tick_at,
            next_tick_at=chosen.next_tick_at,
            last_tick_at=chosen.ticks[-1] if chosen.ticks else None,
            starts=tuple(starts),
        ),
        now=now,
    )
    if won and starts:
        for new in starts:
            new_executions.started(engine.channel, new.run_id, new.key, new.name)
        engine.wake_recovery()  # a Worker of this process may take them at once
    return chosen, won


def definition(
    engine: Engine,
    schedule_id: str,
    defn: WorkflowDef,
    args_json: str,
    *,
    cron_expr: str,
    timezone: str,
    catch_up: str,
    paused: bool,
) -> ScheduleRecord:
    """A checked schedule of ``defn`` whose first tick is the first after now."""
    check_key(schedule_id, "schedule_id")
    if len(schedule_id) > MAX_ID:  # room for the prefix and the tick in execution keys
        raise ValueError(f"schedule_id must be at most {MAX_ID} characters")
    cron.check(cron_expr, timezone, catch_up)
    now = engine.clock.now()
    return ScheduleRecord(
        id=schedule_id,
        workflow=defn.name,
        args=args_json,
        queue=defn.task_queue,
        cron=cron_expr,
        timezone=timezone,
        catch_up=catch_up,
        paused=paused,
        next_tick_at=cron.next_tick(cron_expr, timezone, now),
        created_at=now,
        updated_at=now,
    )


async def put(
    engine: Engine,
    schedule: ScheduleRecord,
    *,
    keep_paused: bool,
    audit_note: AuditNote | None = None,
) -> ScheduleRecord:
    stored = await engine.store.put_schedule(
        records.SchedulePut(schedule=schedule, keep_paused=keep_paused),
        now=engine.clock.now(),
        audit=audit_note,
    )
    engine.schedule_wake.set()
    return stored


async def get(engine: Engine, schedule_id: str) -> ScheduleRecord:
    for schedule in await engine.store.list_schedules():
        if schedule.id == schedule_id:
            return schedule
    raise errors.ScheduleNotFound(schedule_id)


async def set_paused(
    engine: Engine, schedule_id: str, *, paused: bool, reason: str | None = None
) -> ScheduleRecord:
    note = audit.note("schedule.pause" if paused else "schedule.resume", reason)
    schedule = await get(engine, schedule_id)
    now = engine.clock.now()
    stored = await engine.store.set_schedule_paused(
        records.SchedulePause(
            id=schedule_id,
            paused=paused,
            next_tick_at=cron.next_tick(schedule.cron, schedule.timezone, now),
        ),
        now=now,
        audit=note,
    )
    if stored is None:
        raise errors.ScheduleNotFound(schedule_id)
    engine.schedule_wake.set()
    return stored


async def trigger(engine: Engine, schedule_id: str, reason: str | None = None) -> WorkflowRecord:
    """Start one execution of the schedule now, outside its ticks (even if it is paused)."""
    note = audit.note("schedule.trigger", reason, schedule=schedule_id)
    schedule = await get(engine, schedule_id)
    new = execution(engine, schedule, f"schedule:{schedule_id}:manual:{new_id()}")
    result = await engine.store.create_workflow(
        new, now=engine.clock.now(), lease=None, replace_live=False, audit=note
    )
    if result.created:
        new_executions.started(engine.channel, result.record.run_id, new.key, new.name)
    engine.wake_recovery()
    return result.record


async def delete(engine: Engine, schedule_id: str, reason: str | None = None) -> None:
    note = audit.note("schedule.delete", reason)
    if not await engine.store.delete_schedule(schedule_id, audit=note):
        raise errors.ScheduleNotFound(schedule_id)
