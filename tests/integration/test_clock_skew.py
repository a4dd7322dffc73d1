"""A worker whose clock is wrong neither steals live leases nor fires timers early (PostgreSQL)."""

from __future__ import annotations

import asyncio

import sagaway as sw
from sagaway.clock import SystemClock


class SkewedClock(SystemClock):
    """This machine's clock, set an hour ahead."""

    def now(self) -> float:
        return super().now() + 3600.0


def _define(manager: sw.Manager, entered: asyncio.Event, release: asyncio.Event) -> None:
    @manager.register_activity(name="hold")
    async def hold() -> str:
        entered.set()
        await release.wait()
        return "held"

    @manager.register_workflow(name="flow")
    async def flow() -> str:
        return await hold()

    @manager.register_workflow(name="timer")
    async def timer() -> str:
        await manager.sleep(600)
        return "rang"


async def test_skewed_worker_does_not_steal_a_live_lease(postgres_url: str) -> None:
    entered, release = asyncio.Event(), asyncio.Event()
    honest = sw.Manager(postgres_url, lease_timeout=30.0, poll_interval=0.05)
    skewed = sw.Manager(postgres_url, lease_timeout=30.0, poll_interval=0.05, clock=SkewedClock())
    for manager in (honest, skewed):
        _define(manager, entered, release)

    async with honest:
        handle = await honest.workflow("flow").execute(idempotency_key="f")
        await asyncio.wait_for(entered.wait(), 10)
        timer_handle = await honest.workflow("timer").execute(idempotency_key="t")
        while await timer_handle.status() is not sw.WorkflowStatus.WAITING:  # noqa: ASYNC110
            await asyncio.sleep(0.01)
        owner = (await handle.describe()).owner
        async with skewed:
            recovery = skewed._runners.recovery
            assert recovery is not None
            # An hour ahead, the lease (30 s) and the timer (10 min) would both look expired;
            # with the database's clock, a scan claims neither.
            assert await recovery.run_once() == 0
            assert (await handle.describe()).owner == owner
            assert await timer_handle.status() is sw.WorkflowStatus.WAITING
        release.set()
        assert await handle.result(timeout=10) == "held"
