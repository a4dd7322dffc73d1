"""Store contract of schedules on every backend: create, update (the next tick is kept when the
expression and zone are unchanged), list, pause/resume, delete, and ``fire_schedule``'s
compare-and-set: of two stores racing on one tick, exactly one wins and creates its executions."""

from __future__ import annotations

import asyncio
import dataclasses

from sagaway.store import Store
from sagaway.store.records import ScheduleFire, SchedulePause, SchedulePut, ScheduleRecord
from tests.store_helpers import T0, new


def schedule(schedule_id: str = "nightly", **kw: object) -> ScheduleRecord:
    values: dict[str, object] = {
        "id": schedule_id,
        "workflow": "report",
        "args": "{}",
        "queue": "default",
        "cron": "* * * * *",
        "timezone": "UTC",
        "catch_up": "one",
        "paused": False,
        "next_tick_at": T0 + 60,
        "created_at": T0,
        "updated_at": T0,
    }
    values.update(kw)
    return ScheduleRecord(**values)  # type: ignore[arg-type]


async def test_create_update_list_delete(store: Store) -> None:
    created = await store.put_schedule(SchedulePut(schedule=schedule(), keep_paused=False), now=T0)
    assert created == schedule()
    await store.put_schedule(
        SchedulePut(schedule=schedule("hourly", cron="0 * * * *"), keep_paused=False), now=T0
    )
    assert [s.id for s in await store.list_schedules()] == ["hourly", "nightly"]

    # Same expression and zone: the stored next tick stays (missed ticks stay due).
    same = schedule(args='{"n": 1}', next_tick_at=T0 + 600, catch_up="all")
    updated = await store.put_schedule(SchedulePut(schedule=same, keep_paused=False), now=T0 + 5)
    assert (updated.args, updated.catch_up, updated.next_tick_at) == ('{"n": 1}', "all", T0 + 60)
    assert (updated.created_at, updated.updated_at) == (T0, T0 + 5)
    # Another expression: its own next tick.
    other = schedule(cron="*/5 * * * *", next_tick_at=T0 + 300)
    assert (
        await store.put_schedule(SchedulePut(schedule=other, keep_paused=False), now=T0 + 6)
    ).next_tick_at == T0 + 300

    assert await store.delete_schedule("hourly")
    assert not await store.delete_schedule("hourly")
    assert [s.id for s in await store.list_schedules()] == ["nightly"]


async def test_pause_and_resume(store: Store) -> None:
    await store.put_schedule(SchedulePut(schedule=schedule(), keep_paused=False), now=T0)
    paused = await store.set_schedule_paused(
        SchedulePause(id="nightly", paused=True, next_tick_at=T0 + 999), now=T0
    )
    assert paused is not None and paused.paused and paused.next_tick_at == T0 + 60
    # A paused schedule does not fire.
    assert not await store.fire_schedule(
        ScheduleFire(
            id="nightly", tick_at=T0 + 60, next_tick_at=T0 + 120, last_tick_at=None, starts=()
        ),
        now=T0,
    )
    # A declared schedule written again at open keeps the operator's pause.
    kept = await store.put_schedule(SchedulePut(schedule=schedule(), keep_paused=True), now=T0 + 1)
    assert kept.paused
    # Resuming moves the next tick to the one given (the ticks of the pause are not run).
    resumed = await store.set_schedule_paused(
        SchedulePause(id="nightly", paused=False, next_tick_at=T0 + 3600), now=T0 + 3500
    )
    assert resumed is not None and not resumed.paused and resumed.next_tick_at == T0 + 3600
    # Resuming a running schedule changes nothing.
    again = await store.set_schedule_paused(
        SchedulePause(id="nightly", paused=False, next_tick_at=T0 + 9999), now=T0 + 3500
    )
    assert again is not None and again.next_tick_at == T0 + 3600
    assert (
        await store.set_schedule_paused(
            SchedulePause(id="nope", paused=True, next_tick_at=0), now=T0
        )
        is None
    )
    # put with paused=False (not keep_paused) on a paused one resumes it with the new next tick.
    await store.set_schedule_paused(
        SchedulePause(id="nightly", paused=True, next_tick_at=0), now=T0
    )
    put = await store.put_schedule(
        SchedulePut(schedule=schedule(next_tick_at=T0 + 7200), keep_paused=False), now=T0
    )
    assert not put.paused and put.next_tick_at == T0 + 7200


async def test_fire_creates_the_ticks_executions_once(store: Store) -> None:
    await store.put_schedule(SchedulePut(schedule=schedule(), keep_paused=False), now=T0)
    starts = [new("schedule:nightly:a"), new("schedule:nightly:b")]
    assert await store.fire_schedule(
        ScheduleFire(
            id="nightly",
            tick_at=T0 + 60,
            next_tick_at=T0 + 180,
            last_tick_at=T0 + 120,
            starts=tuple(starts),
        ),
        now=T0 + 121,
    )
    (row,) = await store.list_schedules()
    assert (row.next_tick_at, row.last_tick_at) == (T0 + 180, T0 + 120)
    for key in ("schedule:nightly:a", "schedule:nightly:b"):
        record = await store.get_workflow(key)
        assert record is not None and record.status.value == "PENDING"
    # The same tick again (a scheduler that read the old value): nothing changes.
    late = [new("schedule:nightly:c")]
    assert not await store.fire_schedule(
        ScheduleFire(
            id="nightly",
            tick_at=T0 + 60,
            next_tick_at=T0 + 180,
            last_tick_at=None,
            starts=tuple(late),
        ),
        now=T0 + 122,
    )
    assert await store.get_workflow("schedule:nightly:c") is None
    # A key already taken is left as it is (the execution of a tick is not created twice).
    first = await store.get_workflow("schedule:nightly:a")
    assert await store.fire_schedule(
        ScheduleFire(
            id="nightly",
            tick_at=T0 + 180,
            next_tick_at=T0 + 240,
            last_tick_at=T0 + 180,
            starts=(new("schedule:nightly:a"),),
        ),
        now=T0 + 181,
    )
    assert await store.get_workflow("schedule:nightly:a") == first


async def test_two_stores_racing_on_one_tick(store: Store, other: Store) -> None:
    """Both read next_tick_at = T0+60 and fire it at once, many times over: one wins each."""
    await store.put_schedule(SchedulePut(schedule=schedule(), keep_paused=False), now=T0)
    for round_ in range(10):
        tick = T0 + 60 * (round_ + 1)

        async def race(s: Store, who: str, tick: float = tick) -> bool:
            return await s.fire_schedule(
                ScheduleFire(
                    id="nightly",
                    tick_at=tick,
                    next_tick_at=tick + 60,
                    last_tick_at=tick,
                    starts=(new(f"schedule:nightly:{tick}:{who}"),),
                ),
                now=tick,
            )

        results = await asyncio.gather(race(store, "a"), race(other, "b"))
        assert sorted(results) == [False, True], round_
        winner = "a" if results[0] else "b"
        loser = "b" if results[0] else "a"
        assert await store.get_workflow(f"schedule:nightly:{tick}:{winner}") is not None
        assert await store.get_workflow(f"schedule:nightly:{tick}:{loser}") is None
    (row,) = await other.list_schedules()
    assert row.next_tick_at == T0 + 660


async def test_records_cross_the_store_unchanged(store: Store) -> None:
    odd = schedule("weird id/é", timezone="Europe/Paris", cron="30 2 * * *", catch_up="skip")
    stored = await store.put_schedule(SchedulePut(schedule=odd, keep_paused=False), now=T0)
    assert stored == dataclasses.replace(odd)
    assert await store.list_schedules() == [stored]
