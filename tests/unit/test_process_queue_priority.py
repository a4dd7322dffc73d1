"""A per-process activity queue (``sw.Queue``, scope "process") serves its waiting calls by
priority, then first come: for a free slot of its concurrency and for its next start of its
rate. A waiter cancelled while it waits is skipped, and never keeps a slot."""

from __future__ import annotations

import asyncio

import sagaway as sw
from sagaway._engine.local_runner import QueueLimiter
from sagaway.testing.clock import FakeClock


async def _queued(limiter: QueueLimiter, calls: list[tuple[str, int]], ran: list[str]) -> None:
    """Hold the queue while ``calls`` (tag, priority) line up in that order, then let go."""
    holding, release = asyncio.Event(), asyncio.Event()

    async def call(tag: str, priority: int) -> None:
        async with limiter.slot(priority):
            ran.append(tag)
            if tag == "first":
                holding.set()
                await release.wait()

    tasks = [asyncio.create_task(call("first", 1))]
    await holding.wait()
    for tag, priority in calls:
        tasks.append(asyncio.create_task(call(tag, priority)))
        for _ in range(3):
            await asyncio.sleep(0)  # in line before the next one comes
    tasks[2].cancel()  # the second of ``calls`` gives up while it waits
    release.set()
    await asyncio.gather(*tasks, return_exceptions=True)


async def test_a_free_slot_goes_by_priority_then_first_come() -> None:
    limiter = QueueLimiter(sw.Queue(concurrency=1), FakeClock())
    ran: list[str] = []
    calls = [("low-0", 1), ("gone", 5), ("low-1", 1), ("mid", 3), ("high", 5), ("low-2", 1)]
    await _queued(limiter, calls, ran)
    assert ran == ["first", "high", "mid", "low-0", "low-1", "low-2"]
    async with limiter.slot(1):  # every slot was given back
        pass


async def test_the_next_start_goes_by_priority_then_first_come() -> None:
    """Rate 1 a second: the first call starts at once, the second waits for the next start
    (it holds it); the others line up behind it for the starts after."""
    clock = FakeClock()
    limiter = QueueLimiter(sw.Queue(rate_per_second=1), clock)
    ran: list[str] = []

    async def call(tag: str, priority: int) -> None:
        async with limiter.slot(priority):
            ran.append(tag)

    tasks = []
    for tag, priority in [("first", 1), ("next", 1), ("low", 1), ("gone", 4), ("high", 5)]:
        tasks.append(asyncio.create_task(call(tag, priority)))
        for _ in range(3):
            await asyncio.sleep(0)
    tasks[3].cancel()
    while not all(task.done() for task in tasks):
        await clock.advance(1.0)
    assert ran == ["first", "next", "high", "low"]
