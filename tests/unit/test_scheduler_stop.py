"""Stopping the scheduler lets a tick being started finish: it is counted, not cancelled."""

from __future__ import annotations

import asyncio
import types
from typing import Any

import pytest

from sagaway.schedules import scheduler as scheduler_mod
from sagaway.schedules import ticks


class _Clock:
    def now(self) -> float:
        return 100.0

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


def _engine(schedule: Any) -> Any:
    async def list_schedules() -> list[Any]:
        return [schedule]

    return types.SimpleNamespace(
        clock=_Clock(),
        schedule_wake=asyncio.Event(),
        poll_interval=3600.0,
        store=types.SimpleNamespace(list_schedules=list_schedules),
    )


async def test_a_fire_in_flight_when_stopping_is_let_finish_and_counted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    schedule = types.SimpleNamespace(id="every", paused=False, next_tick_at=50.0)
    committing, release = asyncio.Event(), asyncio.Event()
    plan = ticks.Plan(ticks=[50.0], next_tick_at=200.0)

    async def fire(engine: Any, record: Any, *, started_at: float) -> tuple[ticks.Plan, bool]:
        committing.set()
        await release.wait()  # the store commits the start meanwhile
        return plan, True

    monkeypatch.setattr(ticks, "fire", fire)
    scheduler = scheduler_mod.Scheduler(_engine(schedule))
    scheduler.start()
    await asyncio.wait_for(committing.wait(), 5)
    stopping = asyncio.create_task(scheduler.stop())
    await asyncio.sleep(0)
    release.set()
    await asyncio.wait_for(stopping, 5)
    assert scheduler.fired == 1


async def test_a_scan_that_does_not_end_is_cancelled_after_the_grace(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    schedule = types.SimpleNamespace(id="every", paused=False, next_tick_at=50.0)
    committing, cancelled = asyncio.Event(), asyncio.Event()

    async def fire(engine: Any, record: Any, *, started_at: float) -> tuple[ticks.Plan, bool]:
        committing.set()
        try:
            await asyncio.Event().wait()  # a store that never answers
        except asyncio.CancelledError:
            cancelled.set()
            raise
        raise AssertionError("unreachable")

    monkeypatch.setattr(ticks, "fire", fire)
    scheduler = scheduler_mod.Scheduler(_engine(schedule))
    scheduler.start()
    await asyncio.wait_for(committing.wait(), 5)
    await asyncio.wait_for(scheduler.stop(grace=0.05), 5)
    assert cancelled.is_set() and scheduler.fired == 0
