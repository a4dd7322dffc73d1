"""Schedules through the Manager, on every backend, in fake time: one execution per tick with
three workers on one database, catch-up after a stopped cluster, pause/resume/trigger/delete,
schedules declared at registration, and the errors of bad definitions."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, generate_latest

import sagaway as sw
from sagaway._engine import cron
from sagaway.store.records import ListQuery, WorkflowRecord
from sagaway.telemetry import metrics
from sagaway.testing import FakeClock
from tests.store_helpers import raw_sql

T = 1_750_000_000.0
"""The fake clock's start. (On PostgreSQL the engine reads the database's clock: the fake
clock plus a fixed offset, so the tests take tick times from the engine's clock.)"""


async def eventually(check: Callable[[], Awaitable[bool]], what: str, timeout: float = 15) -> None:
    """Poll ``check`` (real time) until it holds; fail naming ``what`` after ``timeout``."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not await check():
        if loop.time() > deadline:
            raise AssertionError(f"not within {timeout}s: {what}")
        await asyncio.sleep(0.01)


def worker(
    db_url: str,
    clock: FakeClock,
    ran: list[str],
    *,
    version: str | None = None,
    run_versions: set[str | None] | None = None,
    **schedule: Any,
) -> sw.Manager:
    """A Manager (one worker process, of code ``version`` running ``run_versions``) with the
    workflow ``job``, whose activity notes the key of each execution it runs in ``ran``."""
    manager = sw.Manager(
        db_url, clock=clock, poll_interval=1.0, version=version, run_versions=run_versions
    )

    @manager.register_activity(name="note")
    async def note() -> None:
        ran.append(sw.activity_info().workflow_key)

    @manager.register_workflow(name="job", **schedule)
    async def job() -> str:
        await note()
        return "done"

    return manager


async def executions(manager: sw.Manager, schedule_id: str) -> list[WorkflowRecord]:
    store = manager._require_engine().store
    found = await store.list_page(ListQuery(limit=5000, key_prefix=f"schedule:{schedule_id}:"))
    return sorted(found, key=lambda r: r.key)


@contextlib.asynccontextmanager
async def running(*managers: sw.Manager) -> AsyncIterator[None]:
    async with contextlib.AsyncExitStack() as stack:
        for manager in managers:
            await stack.enter_async_context(manager)
        yield


def keys(schedule_id: str, ticks: list[float]) -> list[str]:
    return [f"schedule:{schedule_id}:{cron.label(t)}" for t in ticks]


def engine_now(manager: sw.Manager) -> float:
    return manager._require_engine().clock.now()


async def advance_to(clock: FakeClock, manager: sw.Manager, at: float) -> None:
    """Move the fake clock until ``manager``'s engine reads ``at``."""
    await clock.advance(max(at - engine_now(manager), 0.0))


async def test_three_workers_start_one_execution_per_tick(db_url: str) -> None:
    """A schedule every second, 20 s of fake time, three Managers on one database: each tick
    is started once (one scheduler wins it) and run once; none is missed."""
    clock = FakeClock(T)
    ran: list[str] = []
    managers = [worker(db_url, clock, ran) for _ in range(3)]
    async with running(*managers):
        await managers[0].schedule("every-second", "job", "* * * * * *")
        first = cron.next_tick("* * * * * *", "UTC", engine_now(managers[0]))
        ticks = [first + n for n in range(20)]
        for tick in ticks:
            # Half a second past the tick: each engine measured its own offset to the database
            # clock (PostgreSQL), a few milliseconds apart.
            await advance_to(clock, managers[0], tick + 0.5)
            expected = keys("every-second", [tick])[0]

            async def started(expected: str = expected) -> bool:
                found = await executions(managers[1], "every-second")
                return bool(found) and found[-1].key == expected

            await eventually(started, f"the execution of tick {tick}")

        async def all_ran() -> bool:
            return len(ran) >= 20

        await eventually(all_ran, "20 executions run")
        found = await executions(managers[2], "every-second")
        schedulers = [m.scheduler for m in managers]
        fired = sum(s.fired for s in schedulers if s is not None)
    want = keys("every-second", ticks)
    assert [r.key for r in found] == want
    assert sorted(ran) == want  # each run once
    assert fired == 20  # each tick won by one scheduler


@pytest.mark.parametrize("policy", ["skip", "one", "all"])
async def test_catch_up_after_the_cluster_was_stopped(db_url: str, policy: str) -> None:
    """Ten ticks of a schedule pass while no Manager runs; the next Manager to open runs none
    of them (skip), the latest (one) or all ten (all), then the following tick as usual."""
    clock = FakeClock(T)
    ran: list[str] = []
    hour = 3600.0
    async with worker(db_url, clock, ran) as first:
        await first.schedule("s", "job", "0 * * * *", catch_up=policy)
        (row,) = await first.list_schedules()
        start = row.next_tick_at
        fake_time = first._require_engine().clock is clock
        if fake_time:
            await advance_to(clock, first, start - hour / 2)
    if fake_time:
        await clock.advance(10 * hour)  # ten ticks come while the cluster is stopped
    else:
        # On PostgreSQL (and through an Engine Server) a process reads the server's clock when
        # it opens, so a jump of the fake clock does not carry over to the next Manager: the
        # stopped cluster's state (ten ticks due, none started) is made by moving the next tick
        # ten hours back instead.
        raw_sql(db_url, "UPDATE schedules SET next_tick_at = next_tick_at - 36000")
        start -= 10 * hour
    later = worker(db_url, clock, ran)
    async with later:

        async def caught_up() -> bool:
            (row,) = await later.list_schedules()
            return row.next_tick_at > start + 9 * hour

        await eventually(caught_up, "the schedule caught up")
        (row,) = await later.list_schedules()
        missed = [start + hour * k for k in range(int((row.next_tick_at - start) // hour))]
        # Exactly ten in fake time; on PostgreSQL real time may have crossed one more hour.
        assert len(missed) == 10 or (len(missed) == 11 and not fake_time)
        await advance_to(clock, later, row.next_tick_at + 0.5)  # on time, whatever the policy
        expected = {"skip": [], "one": missed[-1:], "all": missed}[policy] + [row.next_tick_at]

        async def on_time() -> bool:
            return len(await executions(later, "s")) == len(expected)

        await eventually(on_time, "the tick after the restart started")
        found = [r.key for r in await executions(later, "s")]
    assert found == keys("s", expected)


async def test_pause_resume_trigger_delete(db_url: str) -> None:
    clock = FakeClock(T)
    ran: list[str] = []
    manager = worker(db_url, clock, ran)
    async with manager:
        await manager.schedule("hourly", "job", "0 * * * *", timezone="Europe/Paris")
        (row,) = await manager.list_schedules()
        assert (row.id, row.workflow, row.cron, row.timezone, row.catch_up, row.paused) == (
            "hourly",
            "job",
            "0 * * * *",
            "Europe/Paris",
            "one",
            False,
        )
        now = engine_now(manager)
        assert row.next_tick_at == cron.next_tick("0 * * * *", "UTC", now)
        assert (await manager.pause_schedule("hourly")).paused
        await clock.advance(7200)  # two ticks while paused: neither runs
        await asyncio.sleep(0.2)
        resumed = await manager.resume_schedule("hourly")
        assert not resumed.paused
        assert resumed.next_tick_at == cron.next_tick("0 * * * *", "UTC", now + 7200)
        assert await executions(manager, "hourly") == []
        handle = await manager.trigger_schedule("hourly")
        assert handle.key.startswith("schedule:hourly:manual:")
        assert await handle.result(timeout=15) == "done"
        await manager.delete_schedule("hourly")
        assert await manager.list_schedules() == []
        for verb in (
            manager.pause_schedule,
            manager.resume_schedule,
            manager.trigger_schedule,
            manager.delete_schedule,
        ):
            with pytest.raises(sw.SagawayError, match="no schedule with id 'hourly'"):
                await verb("hourly")
    assert ran == [handle.key]


async def test_a_declared_schedule_is_written_when_workers_open(db_url: str) -> None:
    clock = FakeClock(T)
    ran: list[str] = []
    declared = worker(db_url, clock, ran, schedule="*/5 * * * * *", catch_up="all")
    async with declared:
        (row,) = await declared.list_schedules()
        first = cron.next_tick("*/5 * * * * *", "UTC", engine_now(declared))
        assert (row.id, row.cron, row.catch_up, row.next_tick_at) == (
            "job",
            "*/5 * * * * *",
            "all",
            first,
        )
        await declared.pause_schedule("job")
    # Opened again (a deploy): the definition is written again, the operator's pause stays.
    again = worker(db_url, clock, ran, schedule="*/10 * * * * *")
    async with again:
        (row,) = await again.list_schedules()
        assert (row.cron, row.paused) == ("*/10 * * * * *", True)


def test_bad_definitions_are_refused_at_registration() -> None:
    manager = sw.Manager("sqlite:///:memory:")

    async def job() -> None: ...

    async def needs(order_id: int) -> None: ...

    cases: list[tuple[dict[str, Any], str]] = [
        ({"schedule": "61 * * * *"}, "bad minute field"),
        ({"schedule": "* * *"}, "3 fields"),
        ({"schedule": "* * * * *", "schedule_timezone": "Mars/Base"}, "unknown time zone"),
        ({"schedule": "* * * * *", "catch_up": "some"}, "one of 'skip', 'one' or 'all'"),
    ]
    for options, message in cases:
        with pytest.raises(ValueError, match=message):
            manager.register_workflow(name=f"j{len(message)}", **options)(job)
    with pytest.raises(ValueError, match="arguments do not fit"):
        manager.register_workflow(schedule="* * * * *")(needs)
    manager.register_workflow(schedule="* * * * *", schedule_args=(7,), name="n7")(needs)
    manager.register_workflow(schedule="* * * * *", schedule_args={"order_id": 8}, name="n8")(needs)


async def test_bad_runtime_schedules_are_refused(tmp_path: Any) -> None:
    manager = sw.Manager(f"sqlite:///{tmp_path}/s.db")

    @manager.register_workflow
    async def job() -> None: ...

    async with manager.connect():
        with pytest.raises(sw.NotRegistered):
            await manager.schedule("s", "nope", "* * * * *")
        with pytest.raises(ValueError, match="bad hour field"):
            await manager.schedule("s", job, "0 24 * * *")
        with pytest.raises(ValueError, match="unknown time zone"):
            await manager.schedule("s", job, "0 1 * * *", timezone="Nowhere/Else")
        with pytest.raises(ValueError, match="catch_up"):
            await manager.schedule("s", job, "0 1 * * *", catch_up="every")
        with pytest.raises(TypeError):
            await manager.schedule("s", job, "0 1 * * *", args=(1,))
        with pytest.raises(ValueError, match="at most 400 characters"):
            await manager.schedule("s" * 401, job, "0 1 * * *")
        assert await manager.list_schedules() == []


@pytest.mark.direct_db  # reads the rows behind the store's back
async def test_an_encrypted_schedule_stores_no_plaintext_arguments(db_url: str) -> None:
    """With ``Manager(codec=Encrypt(...))`` a schedule's arguments and those of the executions
    it starts are sealed in the database, and the workflow gets them in the clear."""
    from sagaway.codecs import Encrypt
    from tests.store_helpers import raw_sql

    secret = "iban-FR76-secret"
    clock = FakeClock(T)
    manager = sw.Manager(db_url, clock=clock, codec=Encrypt(keys=[Encrypt.generate_key()]))

    @manager.register_workflow(name="pay")
    async def pay(iban: str) -> str:
        return iban

    async with manager:
        await manager.schedule("payroll", pay, "* * * * * *", args=(secret,))
        (row,) = await manager.list_schedules()
        assert json.loads(row.args) == {"iban": secret}
        handle = await manager.trigger_schedule("payroll")
        assert await handle.result(timeout=15) == secret
        # A tick of it: fire the schedule as a scheduler would, once its tick is due.
        await advance_to(clock, manager, row.next_tick_at + 0.5)

        async def ticked() -> bool:
            return len(await executions(manager, "payroll")) == 2  # the tick and the trigger

        await eventually(ticked, "the tick started")
    stored = raw_sql(db_url, "SELECT args FROM schedules") + raw_sql(
        db_url, "SELECT args FROM workflows"
    )
    assert stored and all(secret not in str(args) for (args,) in stored)


async def test_ticks_record_the_code_version_and_count_as_started(db_url: str) -> None:
    """Under ``Manager(version="v2", run_versions={"v2"})`` a tick's execution and a trigger's
    record v2, so the worker of v2 runs them (they stayed PENDING with no version), and both
    count in the ``started`` metric as a client's start does."""
    registry = metrics.enable_metrics(CollectorRegistry())
    try:
        clock = FakeClock(T)
        ran: list[str] = []
        manager = worker(db_url, clock, ran, version="v2", run_versions={"v2"})
        async with manager:
            await manager.schedule("v", "job", "* * * * * *")
            (row,) = await manager.list_schedules()
            await advance_to(clock, manager, row.next_tick_at + 0.5)
            tick = keys("v", [row.next_tick_at])[0]

            async def ran_tick() -> bool:
                return tick in ran

            await eventually(ran_tick, "the tick's execution run by the worker of v2")
            await manager.pause_schedule("v")
            handle = await manager.trigger_schedule("v")
            assert await handle.result(timeout=15) == "done"
            found = {r.key: r for r in await executions(manager, "v")}
            started = generate_latest(registry).decode()
        assert found[tick].code_version == "v2"
        assert found[handle.key].code_version == "v2"
        assert found[tick].status is sw.WorkflowStatus.COMPLETED
        assert 'sagaway_workflows_started_total{workflow="job"} 2.0' in started
    finally:
        metrics.disable_metrics()
