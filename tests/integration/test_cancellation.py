"""Cooperative cancellation with compensation, and workflow deadlines (SQLite, PostgreSQL).

A cancel request is seen by the workflow as ``sw.Cancelled`` at its next durable call or wait;
its Saga undoes the steps done, in reverse order, and it ends CANCELLED. An activity already
running finishes first; compensations are never interrupted.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import sagaway as sw
from sagaway.testing import FakeClock


def make_manager(db_url: str, **options: Any) -> sw.Manager:
    options.setdefault("poll_interval", 0.05)
    return sw.Manager(db_url, **options)


async def wait_until(handle: sw.WorkflowHandle[Any], check: Any) -> sw.WorkflowDescription:
    """Poll ``describe()`` until ``check(description)`` holds (10 s bound, no fixed sleep)."""

    async def poll() -> sw.WorkflowDescription:
        while True:
            description = await handle.describe()
            if check(description):
                return description
            await asyncio.sleep(0.01)

    return await asyncio.wait_for(poll(), 10)


async def ended_on_fake_time(handle: sw.WorkflowHandle[Any], clock: FakeClock) -> None:
    """Let the fake clock tick (the Recovery Worker's polls run on it) until ``handle`` ends."""

    async def tick() -> None:
        while not (await handle.status()).ended:
            await clock.advance(0.05)
            await asyncio.sleep(0.01)

    await asyncio.wait_for(tick(), 10)


def define_hold(manager: sw.Manager) -> tuple[Any, Any, list[str]]:
    """``hold()`` takes something, ``free(token)`` gives it back: the list says what was."""
    undone: list[str] = []

    @manager.register_activity
    async def hold() -> str:
        return "h"

    @manager.register_activity
    async def free(token: str) -> None:
        undone.append(token)

    return hold, free, undone


class Declined(sw.CompletableError):
    """The card was declined."""


def define_order(manager: sw.Manager, log: list[str], gate: asyncio.Event | None = None) -> Any:
    """An order saga: reserve, charge (held at ``gate``), ship; each undone by its pair."""

    @manager.register_activity
    async def reserve(order: str) -> str:
        log.append("reserve")
        return f"res-{order}"

    @manager.register_activity
    async def release(reservation: str) -> None:
        log.append(f"release {reservation}")

    @manager.register_activity
    async def charge(order: str) -> str:
        log.append("charge")
        if gate is not None:
            await gate.wait()
        return f"pay-{order}"

    @manager.register_activity
    async def refund(payment: str) -> None:
        log.append(f"refund {payment}")

    @manager.register_activity
    async def ship(order: str) -> None:
        log.append("ship")

    @manager.register_workflow(name="order")
    async def order(order_id: str) -> str:
        async with sw.Saga() as saga:
            reservation = await reserve(order_id)
            saga.add_compensation(release, reservation)
            payment = await charge(order_id)
            saga.add_compensation(refund, payment)
            await ship(order_id)
            return "shipped"

    return order


async def test_cancel_during_the_second_activity_compensates_and_ends_cancelled(
    db_url: str,
) -> None:
    manager = make_manager(db_url)
    log: list[str] = []
    gate = asyncio.Event()
    order = define_order(manager, log, gate)

    async with manager:
        handle = await manager.workflow(order, "o1").execute(idempotency_key="o1")
        await wait_until(handle, lambda _: "charge" in log)
        assert await manager.cancel("o1", "customer changed their mind")
        gate.set()  # the charge in flight finishes; the next call sees the cancellation
        with pytest.raises(sw.WorkflowCancelled) as info:
            await handle.result(timeout=10)
        description = await handle.describe()
        assert not await handle.cancel()  # it has ended

    assert log == ["reserve", "charge", "refund pay-o1", "release res-o1"]
    assert description.status is sw.WorkflowStatus.CANCELLED
    assert "customer changed their mind" in str(info.value)
    assert str(info.value).count("ended CANCELLED") == 1
    # Where it was cancelled is recorded: the ship call, which never ran.
    cancelled_at = [s for s in description.steps if s.name.endswith("ship")]
    assert [s.status for s in cancelled_at] == [sw.StepStatus.FAILED]
    assert cancelled_at[0].error is not None
    assert cancelled_at[0].error["type"] == "sagaway.Cancelled"
    compensations = [s.name for s in description.steps if s.kind is sw.StepKind.COMPENSATION]
    assert [name.rsplit(".", 1)[-1] for name in compensations] == ["refund", "release"]


async def test_cancel_of_a_waiting_workflow_wakes_it_to_compensate(db_url: str) -> None:
    manager = make_manager(db_url)
    undone: list[str] = []

    @manager.register_activity
    async def hold(seat: str) -> str:
        return seat

    @manager.register_activity
    async def free(seat: str) -> None:
        undone.append(seat)

    @manager.register_workflow
    async def booking() -> str:
        async with sw.Saga() as saga:
            seat = await hold("12A")
            saga.add_compensation(free, seat)
            return await manager.signal("confirm").receive(str)

    async with manager:
        handle = await manager.workflow(booking).execute(idempotency_key="b1")
        await wait_until(handle, lambda d: d.status is sw.WorkflowStatus.WAITING)
        assert await handle.cancel("timed out at the desk")
        with pytest.raises(sw.WorkflowCancelled):
            await handle.result(timeout=10)
        # A signal to an ended workflow is refused; it was not delivered to the cancelled one.
        with pytest.raises(sw.SagawayError):
            await manager.signal("confirm").send("b1", "yes")
    assert undone == ["12A"]


async def test_cancel_during_a_long_timer_compensates(db_url: str) -> None:
    clock = FakeClock()
    manager = make_manager(db_url, clock=clock)
    hold, free, undone = define_hold(manager)

    @manager.register_workflow
    async def trial() -> str:
        async with sw.Saga() as saga:
            saga.add_compensation(free, await hold())
            await manager.sleep(30 * 86400)
            return "converted"

    async with manager:
        handle = await manager.workflow(trial).execute(idempotency_key="t1")
        await wait_until(handle, lambda d: d.status is sw.WorkflowStatus.WAITING)
        assert await handle.cancel()
        with pytest.raises(sw.WorkflowCancelled):
            await handle.result(timeout=10)
    assert undone == ["h"]


async def test_cancel_during_a_short_timer_in_the_worker_compensates(db_url: str) -> None:
    clock = FakeClock()
    manager = make_manager(db_url, clock=clock)
    hold, free, undone = define_hold(manager)

    @manager.register_workflow
    async def flow() -> str:
        async with sw.Saga() as saga:
            saga.add_compensation(free, await hold())
            await manager.sleep(0.5)  # sleeps in the worker, holding the run
            return "done"

    async with manager:
        handle = await manager.workflow(flow).execute(idempotency_key="s1")
        await clock.wait_for_sleep(0.5)
        assert await handle.cancel()
        with pytest.raises(sw.WorkflowCancelled):
            await handle.result(timeout=10)
    assert undone == ["h"]


async def test_cancel_during_a_retry_backoff_stops_retrying(db_url: str) -> None:
    clock = FakeClock()
    manager = make_manager(db_url, clock=clock)
    attempts: list[int] = []
    hold, free, undone = define_hold(manager)

    @manager.register_activity(
        retry=sw.RetryPolicy(initial_interval=600.0, maximum_interval=600.0, maximum_attempts=5)
    )
    async def flaky() -> None:
        attempts.append(sw.activity_info().attempt)
        raise sw.RetryableError("upstream busy")

    @manager.register_workflow
    async def flow() -> None:
        async with sw.Saga() as saga:
            saga.add_compensation(free, await hold())
            await flaky()

    async with manager:
        handle = await manager.workflow(flow).execute(idempotency_key="r1")
        await clock.wait_for_sleep(600.0)
        assert await handle.cancel()
        with pytest.raises(sw.WorkflowCancelled):
            await handle.result(timeout=10)
    assert attempts == [1]  # not retried after the cancellation
    assert undone == ["h"]


async def test_a_cancel_during_compensation_does_not_interrupt_it(db_url: str) -> None:
    manager = make_manager(db_url)
    log: list[str] = []
    gate = asyncio.Event()

    @manager.register_activity
    async def reserve() -> str:
        log.append("reserve")
        return "r"

    @manager.register_activity
    async def release(token: str) -> None:
        log.append("release started")
        await gate.wait()
        log.append("release done")

    @manager.register_activity
    async def notify() -> None:
        log.append("notify")

    @manager.register_activity
    async def undo_notify() -> None:
        log.append("undo notify")

    @manager.register_activity
    async def charge() -> None:
        raise Declined("card declined")

    @manager.register_workflow
    async def flow() -> None:
        async with sw.Saga() as saga:
            saga.add_compensation(release, await reserve())
            await notify()
            saga.add_compensation(undo_notify)
            await charge()

    async with manager:
        handle = await manager.workflow(flow).execute(idempotency_key="c1")
        await wait_until(handle, lambda _: "release started" in log)
        assert await handle.cancel()
        gate.set()
        with pytest.raises(Declined):
            await handle.result(timeout=10)
        assert await handle.status() is sw.WorkflowStatus.FAILED
    assert log == ["reserve", "notify", "undo notify", "release started", "release done"]


async def test_a_workflow_that_handles_the_cancellation_decides_how_it_ends(db_url: str) -> None:
    manager = make_manager(db_url)
    gate = asyncio.Event()
    seen: list[str] = []

    @manager.register_activity
    async def step(name: str) -> str:
        seen.append(name)
        if name == "first":
            await gate.wait()
        return name

    @manager.register_workflow
    async def flow() -> str:
        await step("first")
        try:
            await step("second")
        except sw.Cancelled as exc:
            # Delivered once: durable calls run normally from here on.
            return await step(f"cleanup after: {exc}")
        return "not cancelled"

    async with manager:
        handle = await manager.workflow(flow).execute(idempotency_key="h1")
        await wait_until(handle, lambda _: seen == ["first"])
        assert await handle.cancel("stop")
        gate.set()
        assert await handle.result(timeout=10) == "cleanup after: stop"
    assert seen == ["first", "cleanup after: stop"]


async def test_a_cancelled_parent_cancels_the_child_it_waits_for(db_url: str) -> None:
    manager = make_manager(db_url)
    undone: list[str] = []

    @manager.register_activity
    async def take(what: str) -> str:
        return what

    @manager.register_activity
    async def give_back(what: str) -> None:
        undone.append(what)

    @manager.register_workflow
    async def approval() -> str:
        async with sw.Saga() as saga:
            saga.add_compensation(give_back, await take("child hold"))
            return await manager.signal("decision").receive(str)

    @manager.register_workflow
    async def order() -> str:
        async with sw.Saga() as saga:
            saga.add_compensation(give_back, await take("parent hold"))
            return await manager.workflow(approval).execute_get(idempotency_key="appr-1")

    async with manager:
        parent = await manager.workflow(order).execute(idempotency_key="p1")
        child = manager.get_workflow("appr-1")
        await wait_until(parent, lambda d: d.status is sw.WorkflowStatus.WAITING)
        await wait_until(child, lambda d: d.status is sw.WorkflowStatus.WAITING)
        assert await parent.cancel("order withdrawn")
        with pytest.raises(sw.WorkflowCancelled):
            await parent.result(timeout=10)
        with pytest.raises(sw.WorkflowCancelled) as info:
            await child.result(timeout=10)
    assert "order withdrawn" in str(info.value)
    assert sorted(undone) == ["child hold", "parent hold"]


async def test_the_deadline_cancels_a_waiting_workflow(db_url: str) -> None:
    clock = FakeClock()
    manager = make_manager(db_url, clock=clock)
    hold, free, undone = define_hold(manager)

    @manager.register_workflow
    async def flow() -> str:
        async with sw.Saga() as saga:
            saga.add_compensation(free, await hold())
            return await manager.signal("go").receive(str)  # no timeout of its own

    async with manager:
        handle = await manager.workflow(flow).execute(idempotency_key="d1", deadline=60)
        description = await wait_until(handle, lambda d: d.status is sw.WorkflowStatus.WAITING)
        # Its wait has no end of its own: the deadline is when it becomes due.
        assert description.next_run_at == pytest.approx(description.created_at + 60)
        await clock.advance(61)
        await ended_on_fake_time(handle, clock)
        with pytest.raises(sw.WorkflowCancelled) as info:
            await handle.result(timeout=10)
    assert "deadline" in str(info.value)
    assert undone == ["h"]


async def test_the_deadline_cancels_a_workflow_waiting_in_the_worker(db_url: str) -> None:
    clock = FakeClock()
    manager = make_manager(db_url, clock=clock)
    gate = asyncio.Event()
    hold, free, undone = define_hold(manager)

    @manager.register_activity
    async def slow() -> None:
        await gate.wait()

    @manager.register_workflow
    async def flow() -> None:
        async with sw.Saga() as saga:
            saga.add_compensation(free, await hold())
            # The signal wait stays in the worker beside the running activity.
            await asyncio.gather(slow(), manager.signal("go").receive(str))

    async with manager:
        handle = await manager.workflow(flow).execute(idempotency_key="d2", deadline=5)
        await wait_until(handle, lambda d: len(d.steps) >= 1 and d.status.value == "RUNNING")
        await clock.advance(6)
        gate.set()
        await ended_on_fake_time(handle, clock)
        with pytest.raises(sw.WorkflowCancelled):
            await handle.result(timeout=10)
    assert undone == ["h"]


async def test_a_deadline_not_reached_changes_nothing(db_url: str) -> None:
    manager = make_manager(db_url)

    @manager.register_workflow
    async def quick() -> int:
        return 7

    async with manager:
        assert await manager.workflow(quick).execute_get(deadline=3600) == 7


async def test_cancel_and_deadline_misuse_is_refused_clearly(db_url: str) -> None:
    manager = make_manager(db_url)

    @manager.register_workflow
    async def quick() -> int:
        return 7

    async with manager:
        with pytest.raises(ValueError, match="positive"):
            await manager.workflow(quick).execute(deadline=0)
        with pytest.raises(ValueError, match="positive"):
            await manager.workflow(quick).execute(deadline=float("inf"))
        with pytest.raises(TypeError, match="number of seconds"):
            await manager.workflow(quick).execute(deadline="10")  # type: ignore[arg-type]
        with pytest.raises(sw.WorkflowNotFound):
            await manager.cancel("no-such-key")
        with pytest.raises(TypeError, match="reason"):
            await manager.get_workflow("no-such-key").cancel(3)  # type: ignore[arg-type]
        assert await manager.workflow(quick).execute_get(idempotency_key="q") == 7
        assert not await manager.cancel("q")
        assert await manager.get_workflow("q").status() is sw.WorkflowStatus.COMPLETED


async def test_a_cancel_from_another_process_reaches_a_running_workflow(db_url: str) -> None:
    """The worker learns of a request made by another process: by notice on PostgreSQL, by
    its heartbeat's read on SQLite (which has no notices)."""
    log: list[str] = []
    gate = asyncio.Event()
    worker = make_manager(db_url, lease_timeout=1.5)
    client = make_manager(db_url)
    order = define_order(worker, log, gate)
    define_order(client, [])

    async with worker, client.connect():
        handle = await client.workflow("order", "o2").execute(idempotency_key="o2")
        await wait_until(handle, lambda _: "charge" in log)
        assert await client.cancel("o2", "from the other process")
        assert worker.worker is not None

        async def told() -> None:
            assert worker.worker is not None
            while not any(e.cancel_requested for e in worker.worker.executions()):  # noqa: ASYNC110
                await asyncio.sleep(0.01)

        await asyncio.wait_for(told(), 10)
        gate.set()
        with pytest.raises(sw.WorkflowCancelled):
            await handle.result(timeout=10)
    assert order is not None
    assert log == ["reserve", "charge", "refund pay-o2", "release res-o2"]


async def test_a_fork_of_a_cancelled_workflow_runs_past_where_it_was_cancelled(
    db_url: str,
) -> None:
    manager = make_manager(db_url)
    log: list[str] = []
    gate = asyncio.Event()
    order = define_order(manager, log, gate)

    async with manager:
        handle = await manager.workflow(order, "o3").execute(idempotency_key="o3")
        await wait_until(handle, lambda _: "charge" in log)
        assert await manager.cancel("o3")
        gate.set()
        with pytest.raises(sw.WorkflowCancelled):
            await handle.result(timeout=10)
        # Step 3 (ship) recorded the cancellation: a fork keeping it would be cancelled again.
        with pytest.raises(ValueError, match="recorded its cancellation"):
            await manager.fork("o3", from_step=4, new_key="o3-again")
        # Its refund and release ran after step 3: kept, steps 1-2 would be reused undone.
        with pytest.raises(sw.ForkRefused, match=r"step 4 define_order.refund \(COMPLETED\)"):
            await manager.fork("o3", from_step=3, new_key="o3-again")
        fork = await manager.fork("o3", from_step=3, new_key="o3-again", force=True)
        assert await fork.result(timeout=10) == "shipped"
    assert log == ["reserve", "charge", "refund pay-o3", "release res-o3", "ship"]


async def test_cancel_of_a_suspended_workflow_compensates_without_trying_the_failed_step_again(
    db_url: str,
) -> None:
    manager = make_manager(db_url)
    hold, free, undone = define_hold(manager)
    calls: list[str] = []

    @manager.register_activity
    async def broken() -> None:
        calls.append("broken")
        raise RuntimeError("the partner's API is down")  # incompletable: SUSPENDED

    @manager.register_workflow
    async def flow() -> None:
        async with sw.Saga() as saga:
            saga.add_compensation(free, await hold())
            await broken()

    async with manager:
        handle = await manager.workflow(flow).execute(idempotency_key="sus-1")
        await wait_until(handle, lambda d: d.status is sw.WorkflowStatus.SUSPENDED)
        assert await handle.cancel("partner gone for good")
        with pytest.raises(sw.WorkflowCancelled):
            await handle.result(timeout=10)
    assert calls == ["broken"]  # not tried again once cancelled
    assert undone == ["h"]
