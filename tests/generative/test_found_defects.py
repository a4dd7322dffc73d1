"""Defects the generative test found, each reduced to a small program on the public API.

Each is marked ``xfail(strict=True)`` while it is open: when a fix lands the test passes, the
strict xfail fails, and the marker must go (and the matching switch in ``settings.py`` be turned
on by default).
"""

from __future__ import annotations

import asyncio
from typing import Any
from unittest import mock

import pytest

import sagaway as sw
import sagaway.manager
import sagaway.store
from sagaway.testing import FakeClock


def make_manager(db_url: str, clock: FakeClock, **options: Any) -> sw.Manager:
    options.setdefault("poll_interval", 0.05)
    return sw.Manager(db_url, clock=clock, **options)


async def wait_for_status(
    handle: sw.WorkflowHandle[Any], *statuses: sw.WorkflowStatus, timeout: float = 10.0
) -> sw.WorkflowStatus:
    """Poll (real time, bounded) until the workflow is in one of ``statuses``."""

    async def poll() -> sw.WorkflowStatus:
        while True:
            status = await handle.status()
            if status in statuses:
                return status
            await asyncio.sleep(0.01)

    return await asyncio.wait_for(poll(), timeout)


async def test_gather_timer_beside_activity_holds_worker_slot(db_url: str) -> None:
    clock = FakeClock()
    manager = make_manager(db_url, clock, concurrency=1)

    @manager.register_activity
    async def slow() -> str:
        await clock.sleep(5.0)
        return "slow"

    @manager.register_activity
    async def quick() -> str:
        return "quick"

    @manager.register_workflow
    async def waits_a_day() -> None:
        await asyncio.gather(slow(), manager.sleep(86400.0))

    @manager.register_workflow
    async def other() -> str:
        return await quick()

    async with manager:
        first = await manager.workflow(waits_a_day).execute()
        await clock.wait_for_sleep(5.0)  # the activity runs
        await clock.wait_for_sleep(86400.0)  # the timer waits beside it
        await clock.advance(5.0)  # the activity ends: only the day-long timer is left
        second = await manager.workflow(other).execute()
        # Only waiting, the first workflow must give its (only) slot up; the second then runs.
        assert await wait_for_status(
            first, sw.WorkflowStatus.WAITING, sw.WorkflowStatus.COMPLETED, timeout=3
        )
        assert await second.result(timeout=3) == "quick"


async def test_parallel_saga_compensates_in_completion_order_after_restart(db_url: str) -> None:
    clock = FakeClock()
    undone: list[tuple[str, str]] = []
    fail_undo_once = {"slow": True}

    def build() -> tuple[sw.Manager, Any]:
        manager = make_manager(db_url, clock)

        @manager.register_activity
        async def book(name: str) -> str:
            if name == "slow":
                await clock.sleep(10.0)
            return name

        @manager.register_activity(retry=sw.RetryPolicy(initial_interval=5.0))
        async def undo(name: str) -> None:
            if fail_undo_once.pop(name, False):
                raise sw.RetryableError(f"refund of {name} failed")
            undone.append((name, sw.activity_info().idempotency_key))

        @manager.register_activity
        async def charge() -> None:
            raise sw.CompletableError("declined", code="NSF")

        @manager.register_workflow
        async def trip() -> None:
            async with sw.Saga() as saga:

                async def branch(name: str) -> None:
                    await book(name)
                    saga.add_compensation(undo, name)

                await asyncio.gather(branch("slow"), branch("fast"))  # fast completes first
                await charge()

        return manager, trip

    manager, trip = build()
    async with manager:
        handle = await manager.workflow(trip).execute(idempotency_key="trip-1")
        await clock.wait_for_sleep(10.0)
        await clock.advance(10.0)
        await clock.wait_for_sleep(5.0)  # undo("slow") failed once and waits for its retry
    manager, trip = build()  # the process restarts
    async with manager:
        with pytest.raises(sw.CompletableError):
            await clock.run_until(manager.get_workflow("trip-1").result())
    assert handle.key == "trip-1"
    # "slow" completed last, so it is undone first; each refund under its own key.
    assert [name for name, _ in undone] == ["slow", "fast"]
    assert len({key for _, key in undone}) == 2


async def test_default_child_key_does_not_collide_with_a_gather_branch(db_url: str) -> None:
    clock = FakeClock()
    manager = make_manager(db_url, clock)
    keys: dict[str, str] = {}

    @manager.register_activity
    async def step(name: str) -> None:
        keys[name] = sw.activity_info().idempotency_key

    @manager.register_workflow
    async def child() -> None:
        await step("in child")

    @manager.register_workflow
    async def parent() -> None:
        await manager.workflow(child).execute_get()
        await asyncio.gather(step("branch 1"), step("branch 2"))

    async with manager:
        await clock.run_until(manager.workflow(parent).execute_get(idempotency_key="p"))
    assert len(set(keys.values())) == 3, keys


async def test_terminate_existing_starts_a_new_key_space(db_url: str) -> None:
    clock = FakeClock()
    manager = make_manager(db_url, clock)
    keys: list[tuple[int, str]] = []

    @manager.register_activity
    async def charge(amount: int) -> None:
        keys.append((amount, sw.activity_info().idempotency_key))

    @manager.register_workflow
    async def order(amount: int) -> None:
        await charge(amount)
        await manager.signal("shipped").receive(str)

    async with manager:
        first = await manager.workflow(order, 100).execute(idempotency_key="order-7")
        await wait_for_status(first, sw.WorkflowStatus.WAITING)
        await manager.workflow(order, 250).execute(
            idempotency_key="order-7", on_conflict=sw.OnConflict.TERMINATE_EXISTING
        )
        second = manager.get_workflow("order-7")
        await wait_for_status(second, sw.WorkflowStatus.WAITING)
    assert [amount for amount, _ in keys] == [100, 250]
    assert keys[0][1] != keys[1][1], keys


async def test_parent_of_a_cancelled_child_ends_and_compensates(db_url: str) -> None:
    clock = FakeClock()
    manager = make_manager(db_url, clock)
    undone: list[str] = []

    @manager.register_activity
    async def reserve() -> None:
        pass

    @manager.register_activity
    async def release() -> None:
        undone.append("release")

    @manager.register_workflow
    async def child() -> str:
        return await manager.signal("go").receive(str)

    @manager.register_workflow
    async def parent() -> str:
        async with sw.Saga() as saga:
            await reserve()
            saga.add_compensation(release)
            return await manager.workflow(child).execute_get(idempotency_key="c")

    async with manager:
        handle = await manager.workflow(parent).execute(idempotency_key="p")
        await wait_for_status(handle, sw.WorkflowStatus.WAITING)  # for its child
        kid = manager.get_workflow("c")
        await wait_for_status(kid, sw.WorkflowStatus.WAITING)
        assert await kid.cancel()
        # The parent is due now; on SQLite the Recovery Worker finds it at its next poll.
        status = await clock.run_until(
            wait_for_status(
                handle,
                sw.WorkflowStatus.FAILED,
                sw.WorkflowStatus.CANCELLED,
                sw.WorkflowStatus.SUSPENDED,
            )
        )
    assert status in (sw.WorkflowStatus.FAILED, sw.WorkflowStatus.CANCELLED)
    assert undone == ["release"]


async def test_cancel_runs_the_compensations_of_completed_steps(db_url: str) -> None:
    clock = FakeClock()
    manager = make_manager(db_url, clock)
    undone: list[str] = []

    @manager.register_activity
    async def reserve() -> None:
        pass

    @manager.register_activity
    async def release() -> None:
        undone.append("release")

    @manager.register_workflow
    async def hold() -> None:
        async with sw.Saga() as saga:
            await reserve()
            saga.add_compensation(release)
            await manager.signal("confirm").receive(str)

    async with manager:
        handle = await manager.workflow(hold).execute(idempotency_key="h")
        await wait_for_status(handle, sw.WorkflowStatus.WAITING)
        assert await handle.cancel()
        with pytest.raises(sw.WorkflowCancelled):
            await clock.run_until(handle.result(), timeout=5)
    assert undone == ["release"]


async def test_replayed_branches_get_their_own_recorded_results(db_url: str) -> None:
    clock = FakeClock()
    manager = make_manager(db_url, clock)
    ran: list[str] = []
    b2_ran = asyncio.Event()

    @manager.register_activity
    async def step(name: str) -> str:
        if name == "a1":
            await clock.sleep(10.0)  # branch A's inner gather ends after branch B's
        ran.append(name)
        if name == "b2":
            b2_ran.set()
        return name

    @manager.register_workflow
    async def flow() -> list[str]:
        async def branch(first: str, second: str) -> str:
            await asyncio.gather(step(first))
            return await step(second)

        results = await asyncio.gather(branch("a1", "a2"), branch("b1", "b2"))
        await manager.signal("go").receive(str)  # unloads; the signal replays the workflow
        return list(results)

    async with manager:
        handle = await manager.workflow(flow).execute(idempotency_key="f")
        await clock.wait_for_sleep(10.0)
        await asyncio.wait_for(b2_ran.wait(), 10)  # branch B is done while A still runs
        await clock.advance(10.0)
        await wait_for_status(handle, sw.WorkflowStatus.WAITING)
        await manager.signal("go").send("f", "now")
        result = await clock.run_until(handle.result())
    assert sorted(ran) == ["a1", "a2", "b1", "b2"]  # nothing ran twice
    assert result == ["a2", "b2"]


class _FirstRetryRecordFails:
    """A Store whose first write of a RETRYING step fails (the database blinked)."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.url = inner.url
        self.failed = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def record_step(self, step: Any, *, token: str) -> None:
        if step.status is sw.StepStatus.RETRYING and not self.failed:
            self.failed = True
            raise ConnectionError("database unreachable")
        await self._inner.record_step(step, token=token)


async def test_store_error_in_one_branch_is_not_dropped_for_another_branchs_business_error(
    db_url: str,
) -> None:
    clock = FakeClock()
    manager = make_manager(db_url, clock)

    @manager.register_activity(retry=sw.RetryPolicy(initial_interval=1.0, maximum_attempts=2))
    async def always_busy() -> None:
        raise sw.RetryableError("busy")

    @manager.register_activity
    async def decline() -> None:
        raise sw.CompletableError("declined")

    @manager.register_workflow
    async def flow() -> None:
        results = await asyncio.gather(decline(), always_busy(), return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException):
                raise result  # the first branch's error, as the code chooses

    wrapped: list[_FirstRetryRecordFails] = []

    def open_store(url: str, *, create: bool = True, token: str | None = None) -> Any:
        inner = sagaway.store.open_store(url, create=create, token=token)
        wrapped.append(_FirstRetryRecordFails(inner))
        return wrapped[-1]

    with mock.patch.object(sagaway.manager, "open_store", open_store):
        async with manager:
            handle = await manager.workflow(flow).execute()
            # Without the store error: always_busy exhausts its retries and the run is SUSPENDED
            # (an incompletable failure dooms the run whatever the code raises).
            status = await clock.run_until(
                wait_for_status(handle, sw.WorkflowStatus.SUSPENDED, sw.WorkflowStatus.FAILED)
            )
    assert wrapped and wrapped[0].failed
    assert status is sw.WorkflowStatus.SUSPENDED
