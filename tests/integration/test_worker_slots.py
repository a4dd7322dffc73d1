"""Worker slots: a workflow that only waits holds none, so waiting parents cannot starve children.

The shape that deadlocked: a parent ``gather``s a slow activity with a child's ``execute_get()``.
While the activity runs, the child's wait stays in the worker; when the activity ended, the
parent kept its slot while waiting, and with every slot held that way the children never ran.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

import sagaway as sw
from sagaway.testing import FakeClock
from sagaway.testing.internals import store_of
from sagaway.worker import ExecutionState, Worker


def make_manager(db_url: str, **options: Any) -> sw.Manager:
    options.setdefault("poll_interval", 0.05)
    return sw.Manager(db_url, **options)


def worker_of(manager: sw.Manager) -> Worker:
    assert manager.worker is not None
    return manager.worker


def violations(worker: Worker) -> list[ExecutionState]:
    """Executions holding a slot while they only wait: the invariant says there are none."""
    return [s for s in worker.executions() if s.holds_slot and s.only_waits]


async def until(
    worker: Worker, predicate: Callable[[list[ExecutionState]], bool], timeout: float = 10.0
) -> list[ExecutionState]:
    """Wait (bounded) until the worker's executions satisfy ``predicate``."""

    async def poll() -> list[ExecutionState]:
        while True:
            states = worker.executions()
            if predicate(states):
                return states
            await asyncio.sleep(0.005)

    return await asyncio.wait_for(poll(), timeout)


@contextlib.asynccontextmanager
async def watching_invariant(
    worker: Worker, every: float = 0.0
) -> AsyncIterator[list[ExecutionState]]:
    """Check the slot invariant while the block runs: at every turn of the event loop, or every
    ``every`` seconds.

    A check walks every execution, so with hundreds of them a check at every turn takes the
    loop from the engine: a burst of 150 parents took 1-5 s with checks every few milliseconds
    and up to 150 s with one at every turn (the more executions wait, the more turns, each
    dearer).
    """
    seen: list[ExecutionState] = []

    async def watch() -> None:
        while True:
            seen.extend(violations(worker))
            await asyncio.sleep(every)

    task = asyncio.create_task(watch())
    try:
        yield seen
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def by_key(states: list[ExecutionState], key: str) -> ExecutionState | None:
    return next((s for s in states if s.key == key), None)


async def test_a_parent_waiting_on_its_child_gives_its_slot_back(db_url: str) -> None:
    manager = make_manager(db_url, concurrency=1)
    parent_gate, child_gate = asyncio.Event(), asyncio.Event()

    @manager.register_activity
    async def slow() -> str:
        await parent_gate.wait()
        return "slow"

    @manager.register_activity
    async def child_work() -> str:
        await child_gate.wait()
        return "child"

    @manager.register_workflow
    async def child() -> str:
        return await child_work()

    @manager.register_workflow
    async def parent() -> list[str]:
        results = await asyncio.gather(
            slow(), manager.workflow(child).execute_get(idempotency_key="kid")
        )
        return list(results)

    async with manager:
        worker = worker_of(manager)
        async with watching_invariant(worker) as seen:
            handle = await manager.workflow(parent).execute(idempotency_key="p")

            # The parent's activity runs (it holds the only slot) while its other branch waits
            # for the child, which has been started and waits for a slot.
            def activity_and_wait(states: list[ExecutionState]) -> bool:
                p, kid = by_key(states, "p"), by_key(states, "kid")
                return p is not None and p.activities == 1 and p.waiting == 1 and kid is not None

            states = await until(worker, activity_and_wait)
            assert worker.slots_held == 1
            assert [s.key for s in states if s.holds_slot] == ["p"]
            assert worker.free_slots == 0

            # The activity ends: the parent only waits now, so the child gets the slot.
            parent_gate.set()

            def child_runs(states: list[ExecutionState]) -> bool:
                kid = by_key(states, "kid")
                return kid is not None and kid.holds_slot and kid.activities == 1

            states = await until(worker, child_runs)
            # Only waiting, the parent holds no slot: it unloads (WAITING, no task here).
            p = by_key(states, "p")
            assert p is None or not p.holds_slot
            assert worker.slots_held == 1

            child_gate.set()
            assert await handle.result(timeout=10) == ["slow", "child"]
        assert seen == []
        assert worker.slots_held == 0


@pytest.mark.parametrize(
    ("parents", "concurrency"),
    [
        (6, 4),
        pytest.param(
            150,
            None,
            marks=[pytest.mark.slow, pytest.mark.long, pytest.mark.timeout(900)],
            id="150-default",
        ),
    ],
)
async def test_parents_holding_every_slot_still_let_their_children_finish(
    db_url: str, parents: int, concurrency: int | None
) -> None:
    options = {} if concurrency is None else {"concurrency": concurrency}
    manager = make_manager(db_url, **options)
    slots = manager.concurrency
    assert parents > slots
    gate = asyncio.Event()

    @manager.register_activity
    async def slow(i: int) -> int:
        await gate.wait()
        return i

    @manager.register_activity
    async def double(i: int) -> int:
        return 2 * i

    @manager.register_workflow
    async def child(i: int) -> int:
        return await double(i)

    @manager.register_workflow
    async def parent(i: int) -> int:
        a, b = await asyncio.gather(slow(i), manager.workflow(child, i).execute_get())
        return a + b

    # Started by a process without workers: the Recovery Worker claims a slot's worth of
    # parents at once, so every slot goes to a parent before any child exists.
    client = make_manager(db_url)
    client.registry = manager.registry
    async with client.connect():
        for i in range(parents):
            await client.workflow(parent, i).execute(idempotency_key=f"p{i}")

    async with manager:
        worker = worker_of(manager)
        async with watching_invariant(worker, every=0 if parents <= 10 else 0.002) as seen:
            # Every slot is held by a parent whose activity runs and whose child waits.
            def saturated(states: list[ExecutionState]) -> bool:
                busy = [s for s in states if s.holds_slot and s.activities and s.waiting]
                return len(busy) == slots

            # Generous: on SQLite a burst of 150 parents and their children takes 1-5 s on a
            # 2-core machine (one writer thread); a deadlock never gets there at all.
            await until(worker, saturated, timeout=300)
            assert worker.free_slots == 0
            gate.set()
            handles = [manager.get_workflow(f"p{i}") for i in range(parents)]
            results = await asyncio.wait_for(
                asyncio.gather(*(h.result() for h in handles)), timeout=300
            )
        assert results == [3 * i for i in range(parents)]
        assert seen == []


async def test_recovery_claims_children_while_the_parents_it_claimed_wait(db_url: str) -> None:
    clock = FakeClock()
    broken = {"on": True}
    gate = asyncio.Event()

    def build(concurrency: int) -> tuple[sw.Manager, Any]:
        manager = make_manager(db_url, clock=clock, concurrency=concurrency)

        @manager.register_activity
        async def slow() -> str:
            await gate.wait()
            return "slow"

        @manager.register_activity
        async def child_work() -> str:
            if broken["on"]:
                raise RuntimeError("not yet")
            return "child"

        @manager.register_workflow
        async def child() -> str:
            return await child_work()

        @manager.register_workflow
        async def parent() -> list[str]:
            return list(await asyncio.gather(slow(), manager.workflow(child).execute_get()))

        return manager, parent

    keys = ["p0", "p1"]

    def parents_wait_with_activity(states: list[ExecutionState]) -> bool:
        mine = [s for s in states if s.key in keys]
        return len(mine) == 2 and all(s.activities == 1 and s.waiting == 1 for s in mine)

    # A first process: the parents started their children, which were suspended (retried by
    # recovery 10 s later); it stops while the parents' activities run.
    first, parent = build(10)
    async with first:
        for key in keys:
            await first.workflow(parent).execute(idempotency_key=key)
        await until(worker_of(first), parents_wait_with_activity)

        async def children_suspended() -> None:
            suspended = sw.WorkflowStatus.SUSPENDED
            while len(await first.list_workflows(status=suspended)) < 2:  # noqa: ASYNC110 - a database state
                await asyncio.sleep(0.01)

        await asyncio.wait_for(children_suspended(), 10)

    # A second process with two slots: recovery claims the two parents (the children are not
    # due yet); their activities run again while they wait for their children.
    second, _ = build(2)
    async with second:
        worker = worker_of(second)
        async with watching_invariant(worker) as seen:
            states = await until(worker, parents_wait_with_activity)
            assert all(s.holds_slot for s in states) and worker.free_slots == 0
            broken["on"] = False
            gate.set()
            # Activities done, the parents only wait: both slots are free for the children.
            await until(worker, lambda states: all(s.only_waits for s in states))
            assert worker.free_slots == 2 and worker.slots_held == 0
            handles = [second.get_workflow(key) for key in keys]
            results = await clock.run_until(
                asyncio.gather(*(h.result() for h in handles)), timeout=30
            )
        assert results == [["slow", "child"]] * 2
        assert seen == []


@pytest.mark.parametrize("wait", ["short timer", "signal beside an activity"])
async def test_a_workflow_waiting_in_the_worker_lets_another_run(db_url: str, wait: str) -> None:
    clock = FakeClock()  # never advanced until the end: the waits below last until then
    manager = make_manager(db_url, clock=clock, concurrency=1)
    gate = asyncio.Event()

    @manager.register_activity
    async def slow() -> str:
        await gate.wait()
        return "slow"

    @manager.register_workflow
    async def waits() -> str:
        if wait == "short timer":
            await manager.sleep(0.5)  # under a second: sleeps in the worker
            return "rested"
        _, note = await asyncio.gather(slow(), manager.signal("note").receive(str))
        return note

    @manager.register_workflow
    async def other() -> str:
        return "other"

    async with manager:
        worker = worker_of(manager)
        async with watching_invariant(worker) as seen:
            waiting = await manager.workflow(waits).execute(idempotency_key="w")
            if wait == "short timer":
                await clock.wait_for_sleep(0.5)
            else:
                await until(worker, lambda s: any(x.activities and x.waiting for x in s))
                gate.set()  # the activity ends; the receive still waits in the worker
            await until(worker, lambda s: any(x.only_waits for x in s))
            # The only slot is free while "w" waits: another workflow runs to its end.
            other_run = manager.workflow(other).execute_get(idempotency_key="o")
            assert await asyncio.wait_for(other_run, 10) == "other"
            if wait == "short timer":
                await clock.advance(0.5)
            else:
                await manager.signal("note").send("w", "hello")
            expected = "rested" if wait == "short timer" else "hello"
            assert await clock.run_until(waiting.result()) == expected
        assert seen == []


async def test_a_wait_on_a_stuck_child_unloads_when_the_other_work_ends(db_url: str) -> None:
    """A child wait begun beside an activity must not keep the parent loaded once the activity
    ends: with the child suspended (it may stay so for days), the parent is WAITING, holds no
    lease and runs nowhere, and the child's end after a retry wakes it from the store."""
    manager = make_manager(db_url, concurrency=2)
    gate = asyncio.Event()
    broken = [True]

    @manager.register_activity
    async def slow() -> str:
        await gate.wait()
        return "slow"

    @manager.register_activity
    async def fragile() -> str:
        if broken[0]:
            raise RuntimeError("the service is down")  # not retryable: the child is SUSPENDED
        return "child"

    @manager.register_workflow
    async def child() -> str:
        return await fragile()

    @manager.register_workflow
    async def parent() -> list[str]:
        results = await asyncio.gather(
            slow(), manager.workflow(child).execute_get(idempotency_key="kid")
        )
        return list(results)

    async with manager:
        worker = worker_of(manager)
        handle = await manager.workflow(parent).execute(idempotency_key="p")
        kid = manager.get_workflow("kid")

        async def suspended() -> None:
            while True:
                with contextlib.suppress(sw.WorkflowNotFound):
                    if await kid.status() is sw.WorkflowStatus.SUSPENDED:
                        return
                await asyncio.sleep(0.01)

        await asyncio.wait_for(suspended(), 10)
        # The child wait began while the activity ran: it waits in the worker for now.
        await until(worker, lambda s: (p := by_key(s, "p")) is not None and p.waiting == 1)
        gate.set()  # the activity ends; the stuck child's wait is all that is left

        await until(worker, lambda s: by_key(s, "p") is None)
        record = await handle.describe()
        assert record.status is sw.WorkflowStatus.WAITING
        assert record.owner is None
        assert record.waiting_for == "child:kid"

        broken[0] = False
        assert await manager.retry("kid")
        assert await handle.result(timeout=10) == ["slow", "child"]


async def test_a_child_wait_unloads_when_the_other_work_ends_during_its_read(db_url: str) -> None:
    """The other work can end while the child wait's first read (the non-unloading
    ``wait_for_child``, begun beside it) is under way: its "work ended" notice then comes
    before the wait listens for one. The wait must look again after the read and unload, not
    keep the parent RUNNING (lease held) for as long as the child stays unended; the
    generative test found the parent of a SUSPENDED child spinning that way."""
    manager = make_manager(db_url, concurrency=2)
    reading, go = asyncio.Event(), asyncio.Event()
    ended = asyncio.Event()

    @manager.register_activity
    async def slow() -> str:
        await go.wait()
        return "slow"

    @manager.register_activity
    async def fragile() -> str:
        raise RuntimeError("the service is down")  # not retryable: the child is SUSPENDED

    @manager.register_workflow
    async def child() -> str:
        return await fragile()

    async def slow_then_note() -> str:
        try:
            return await slow()
        finally:
            ended.set()

    @manager.register_workflow
    async def parent() -> list[str]:
        results = await asyncio.gather(
            slow_then_note(), manager.workflow(child).execute_get(idempotency_key="kid")
        )
        return list(results)

    async with manager:
        engine_store = store_of(manager)
        read = engine_store.wait_for_child

        async def held_read(*args: Any, **kwargs: Any) -> Any:
            if not kwargs.get("wait", True):  # the read begun beside the activity
                reading.set()
                await ended.wait()  # the activity ends while the read is under way
                for _ in range(20):
                    await asyncio.sleep(0)
            return await read(*args, **kwargs)

        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(engine_store, "wait_for_child", held_read)
            handle = await manager.workflow(parent).execute(idempotency_key="p")
            await asyncio.wait_for(reading.wait(), 10)
            go.set()
            worker = worker_of(manager)
            await until(worker, lambda s: by_key(s, "p") is None)
            record = await handle.describe()
        assert record.status is sw.WorkflowStatus.WAITING
        assert record.owner is None
        assert record.waiting_for == "child:kid"
