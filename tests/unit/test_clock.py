"""wait_event_or_sleep: an event or a timeout, on the real clock (timer) and on a test clock."""

from __future__ import annotations

import asyncio
import time

import pytest

from sagaway.clock import OffsetClock, SystemClock, wait_event_or_sleep
from sagaway.testing import FakeClock


@pytest.mark.parametrize("clock", [SystemClock(), OffsetClock(SystemClock(), 1e6)])
async def test_real_clock_returns_when_the_event_is_set(clock: SystemClock | OffsetClock) -> None:
    event = asyncio.Event()
    asyncio.get_running_loop().call_soon(event.set)
    started = time.monotonic()
    await wait_event_or_sleep(event, clock, 30.0)
    assert event.is_set() and time.monotonic() - started < 10.0
    assert not [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]


async def test_real_clock_returns_when_the_time_has_passed() -> None:
    event = asyncio.Event()
    await wait_event_or_sleep(event, SystemClock(), 0.01)  # no TimeoutError escapes
    assert not event.is_set()


async def test_real_clock_wait_can_be_cancelled() -> None:
    event = asyncio.Event()
    waiting = asyncio.ensure_future(wait_event_or_sleep(event, SystemClock(), 30.0))
    await asyncio.sleep(0)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting


async def test_an_outer_timeout_still_fires_through_the_wait() -> None:
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.01):
            await wait_event_or_sleep(asyncio.Event(), SystemClock(), 30.0)


async def test_fake_clock_wait_ends_when_the_clock_is_advanced() -> None:
    clock = FakeClock()
    event = asyncio.Event()
    waiting = asyncio.ensure_future(wait_event_or_sleep(event, clock, 5.0))
    await clock.wait_for_sleep(5.0)
    assert not waiting.done()
    await clock.advance(5.0)
    await asyncio.wait_for(waiting, 5)
    assert not event.is_set()


async def test_run_until_jumps_to_the_next_deadline_or_creeps_with_max_jump() -> None:
    clock = FakeClock()
    start = clock.now()

    async def sleeper() -> float:
        await clock.sleep(3600)
        return clock.now()

    assert await clock.run_until(sleeper()) == start + 3600  # one jump

    # Capped: time creeps, so an hour's sleep is not reached within the real timeout.
    with pytest.raises(TimeoutError):
        await clock.run_until(sleeper(), max_jump=0.01, timeout=0.2)
    crept = clock.now() - (start + 3600)
    assert 0 < crept < 1
    for bad in (0, -1.0, float("nan")):
        with pytest.raises(ValueError, match="max_jump"):
            await clock.run_until(sleeper(), max_jump=bad)
