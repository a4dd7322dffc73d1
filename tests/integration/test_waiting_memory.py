"""A WAITING workflow costs its worker nothing: it lives in the database, not in memory.

The wait commits WAITING and unwinds the workflow function (the coroutine, its frame, its
``Execution``); the signal makes it due and a worker runs it again from its recorded history.
These tests pin that down: nothing a waiting workflow's code created stays alive in the worker,
the resumed run is a replay (the code runs again up to the wait), and a heartbeat racing the
wait's write (which gives the lease up) is not taken for a lost lease.
"""

from __future__ import annotations

import asyncio
import gc
import weakref
from typing import Any

import pytest

import sagaway as sw
from sagaway.testing import FakeClock
from sagaway.testing.internals import engine_of

N = 40


class Ballast:
    """What a workflow's frame holds across its wait: alive only while the frame is."""

    def __init__(self, size: int) -> None:
        self.data = bytes(size)


def make_manager(db_url: str, **options: Any) -> sw.Manager:
    options.setdefault("poll_interval", 0.05)
    return sw.Manager(db_url, **options)


async def all_unloaded(manager: sw.Manager, n: int) -> None:
    """Until ``n`` workflows are WAITING and none is still running in this worker."""
    worker = manager.worker
    assert worker is not None

    async def poll() -> None:
        # The worker's state is only seen by looking: WAITING is committed before it unwinds.
        while (await manager.count_workflows()).get(  # noqa: ASYNC110
            sw.WorkflowStatus.WAITING, 0
        ) < n or worker.running_ids:
            await asyncio.sleep(0.01)

    await asyncio.wait_for(poll(), 30)


async def test_waiting_workflows_keep_nothing_alive_and_resume_by_replay(db_url: str) -> None:
    manager = make_manager(db_url)
    ballasts: list[weakref.ref[Ballast]] = []

    @manager.register_workflow
    async def hold(n: int) -> int:
        ballast = Ballast(100_000)
        ballasts.append(weakref.ref(ballast))
        decision: int = await manager.signal("go").receive(int)
        return n * decision + len(ballast.data)

    async with manager:
        handles = [
            await manager.workflow(hold, i).execute(idempotency_key=f"hold-{i}") for i in range(N)
        ]
        await all_unloaded(manager, N)
        gc.collect()
        assert len(ballasts) == N
        # A kept coroutine would keep its ballast: N x 100 kB per N waiting workflows.
        assert [r for r in ballasts if r() is not None] == []
        for i in range(N):
            assert await manager.signal("go").send(f"hold-{i}", 2)
        results = [await h.result(timeout=30) for h in handles]
    assert results == [2 * i + 100_000 for i in range(N)]
    # Each resumed by running its code again from the start (a replay), not by a kept frame.
    assert len(ballasts) == 2 * N


async def test_a_heartbeat_racing_the_wait_write_is_not_a_lost_lease(
    db_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The wait's write commits WAITING and clears the lease, so a heartbeat that runs while
    that write is being acknowledged does not renew it: the workflow is leaving, not lost."""
    clock = FakeClock()
    manager = make_manager(db_url, clock=clock, lease_timeout=30.0)
    committed, go_on, renewed = asyncio.Event(), asyncio.Event(), asyncio.Event()

    @manager.register_workflow
    async def review() -> str:
        decision: str = await manager.signal("approval").receive(str)
        return decision

    async with manager:
        engine = engine_of(manager)
        store = engine.store
        receive, renew = store.receive_signal, store.renew_leases

        async def slow_acknowledgement(*args: Any, **kwargs: Any) -> str | None:
            found = await receive(*args, **kwargs)  # committed WAITING: the row has no lease
            if found is None and not committed.is_set():
                committed.set()
                await go_on.wait()
            return found

        async def observed_renewal(*args: Any, **kwargs: Any) -> set[str]:
            kept = await renew(*args, **kwargs)
            renewed.set()
            return kept

        store.receive_signal = slow_acknowledgement  # type: ignore[method-assign]
        store.renew_leases = observed_renewal  # type: ignore[method-assign]
        handle = await manager.workflow(review).execute(idempotency_key="kyc-1")
        await asyncio.wait_for(committed.wait(), 10)
        await clock.wait_for_sleep(10.0)  # the heartbeat, every lease_timeout / 3
        await clock.advance(10.0)
        await asyncio.wait_for(renewed.wait(), 10)
        await asyncio.sleep(0)  # let the heartbeat act on what it renewed
        go_on.set()
        await all_unloaded(manager, 1)
        assert await manager.signal("approval").send("kyc-1", "yes")
        assert await handle.result(timeout=10) == "yes"
    assert not [r for r in caplog.records if getattr(r, "action", None) == "lease_lost"]
