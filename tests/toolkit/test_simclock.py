"""SimClock: concurrent actors interleave the same way however long their real work takes."""

from __future__ import annotations

import asyncio
import random

import pytest

from sagaway.lab import SimClock


async def _scenario(seed: int) -> list[tuple[float, str]]:
    """Three actors with random real-time latencies between virtual sleeps."""
    rng = random.Random(seed)
    clock = SimClock(start=100.0)
    events: list[tuple[float, str]] = []

    async def actor(name: str, naps: list[float]) -> None:
        async with clock.acting(name):
            for i, nap in enumerate(naps):
                await asyncio.sleep(rng.random() * 0.003)  # "a database commit"
                events.append((clock.elapsed, f"{name}{i}"))
                await clock.sleep(nap)
            events.append((clock.elapsed, f"{name} done"))

    async with clock:
        for name in ("a", "b", "c"):
            clock.expect(name)
        await asyncio.gather(
            actor("a", [1, 5, 1]),
            actor("b", [2, 2, 2]),
            actor("c", [1, 1, 6]),
        )
    return events


async def test_interleaving_does_not_depend_on_real_time() -> None:
    runs = [await _scenario(seed) for seed in range(5)]
    assert all(run == runs[0] for run in runs)
    times = [t for t, _ in runs[0]]
    assert times == sorted(times)  # virtual time never goes back
    assert runs[0][-1] == (8.0, "c done")


async def test_engine_sleeps_do_not_hold_time_and_wake_in_order() -> None:
    clock = SimClock(start=0.0)
    woken: list[str] = []

    async def background() -> None:  # not an actor: an engine heartbeat, say
        await clock.sleep(2.5)
        woken.append(f"background at {clock.now()}")

    async with clock:
        task = asyncio.create_task(background())
        async with clock.acting("driver"):
            await clock.sleep(1)
            woken.append(f"driver at {clock.now()}")
            await clock.sleep(4)
            woken.append(f"driver at {clock.now()}")
        await asyncio.wait_for(task, 5)
    assert woken == ["driver at 1.0", "background at 2.5", "driver at 5.0"]


async def test_time_stands_still_without_actors() -> None:
    clock = SimClock(start=0.0)
    async with clock:
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(clock.sleep(1), 0.05)
    assert clock.now() == 0.0
