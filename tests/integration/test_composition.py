"""Features combined: promises each feature keeps alone must hold together (SQLite, PostgreSQL).

Each test reproduces, through the public API, a way the engine broke a promise when features
were combined: parallel sagas restarted mid-compensation, keys of workflow trees, a replacement
run's keys, a swallowed NonDeterminismError, a cancelled child.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
from typing import Any

import pytest

import sagaway as sw
from sagaway.testing import FakeClock
from sagaway.testing.internals import engine_of, store_of


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


class Declined(sw.CompletableError):
    """The card was declined."""


async def test_parallel_saga_keeps_its_compensation_order_across_a_restart(db_url: str) -> None:
    """Branch b finishes before branch a; a compensation fails once and the process restarts
    while it waits for its retry. The replay returns both recorded calls at once, in start
    order, but must compensate in the recorded order (a, then b), not report divergence."""
    undone: list[str] = []
    undo_attempts: collections.Counter[str] = collections.Counter()
    first_attempt_failed = asyncio.Event()
    b_done = asyncio.Event()

    def build() -> sw.Manager:
        manager = make_manager(db_url, lease_timeout=5)

        @manager.register_activity
        async def reserve(name: str) -> str:
            if name == "a":
                await b_done.wait()  # a completes after b
            else:
                b_done.set()
            return name

        @manager.register_activity(
            retry=sw.RetryPolicy(initial_interval=3600, maximum_interval=3600)
        )
        async def undo(name: str) -> None:
            undo_attempts[name] += 1
            if name == "a" and undo_attempts[name] == 1:
                first_attempt_failed.set()
                raise RuntimeError("refund service down")
            undone.append(name)

        @manager.register_activity
        async def charge() -> None:
            raise Declined("no funds", code="DECLINED")

        @manager.register_workflow(name="order")
        async def order() -> None:
            async with sw.Saga() as saga:

                async def branch(name: str) -> None:
                    await reserve(name)
                    saga.add_compensation(undo, name)

                await asyncio.gather(branch("a"), branch("b"))
                await charge()

        return manager

    first = build()
    async with first:
        handle = await first.workflow("order").execute(idempotency_key="order-1")
        await asyncio.wait_for(first_attempt_failed.wait(), 10)
        await wait_until(handle, lambda d: any(s.status is sw.StepStatus.RETRYING for s in d.steps))
    # The process is gone mid-compensation; another one takes the workflow over.
    second = build()
    async with second:
        with pytest.raises(Declined):
            await second.get_workflow("order-1").result(timeout=10)
        description = await second.get_workflow("order-1").describe()
    assert description.status is sw.WorkflowStatus.FAILED
    assert undone == ["a", "b"]  # reverse order of completion, each once
    compensations = [s.name for s in description.steps if s.kind is sw.StepKind.COMPENSATION]
    assert len(compensations) == 2


async def test_idempotency_keys_are_unique_across_a_workflow_tree(db_url: str) -> None:
    """A child keyed 'P/1' and the parent's gather branch (call 1/1) used to share the activity
    key 'P/1/1' (such a chosen key is refused now; 'P/1/x' is allowed); a grandchild's default
    key 'P/2/2' matched a child started from branch 2."""
    manager = make_manager(db_url)
    keys: list[tuple[str, str]] = []

    @manager.register_activity
    async def effect(label: str) -> None:
        keys.append((label, sw.activity_info().idempotency_key))

    @manager.register_workflow
    async def grandchild(label: str) -> None:
        await effect(label)

    @manager.register_workflow
    async def child(label: str) -> None:
        await effect(label)  # call 1
        await manager.workflow(grandchild, f"{label}.grandchild").execute_get()  # call 2

    @manager.register_workflow
    async def parent() -> None:
        async def branch(n: int) -> None:
            await effect(f"branch-{n}")  # call "n/1": once keyed "P/n/1"
            await manager.workflow(grandchild, f"branch-{n}.child").execute_get()  # "P/n/2"

        await asyncio.gather(branch(1), branch(2))
        # root call 1: a user key with '/'; its activity is keyed by its escaped key space
        # (a bare "P/1", whose activity was once keyed "P/1/1" like branch 1's, is refused now)
        await manager.workflow(child, "user-keyed").execute_get(idempotency_key="P/1/x")
        # root call 2: default key "P/2", whose grandchild was once keyed "P/2/2" too
        await manager.workflow(child, "default-keyed").execute_get()

    async with manager:
        await manager.workflow(parent).execute_get(idempotency_key="P", timeout=20)
        listed = await manager.list_workflows()
    workflow_keys = [w.key for w in listed]
    assert len(workflow_keys) == len(set(workflow_keys)) == 7
    activity_keys = [key for _, key in keys]
    assert len(keys) == 8
    assert len(set(activity_keys)) == len(activity_keys), keys


async def test_terminate_existing_starts_a_new_key_space(db_url: str) -> None:
    """The replacement run's charge(250) must not carry the terminated charge(100)'s key, and its
    child must not attach to the old run's child."""
    manager = make_manager(db_url)
    charges: list[tuple[int, str]] = []
    children: list[tuple[int, str]] = []

    @manager.register_activity
    async def charge(amount: int) -> None:
        charges.append((amount, sw.activity_info().idempotency_key))

    @manager.register_activity
    async def mail(amount: int) -> None:
        children.append((amount, sw.activity_info().workflow_key))

    @manager.register_workflow
    async def notify(amount: int) -> None:
        await mail(amount)

    @manager.register_workflow
    async def pay(amount: int) -> None:
        await charge(amount)
        await manager.workflow(notify, amount).execute()
        await manager.signal("confirm").receive(str)

    async with manager:
        first = await manager.workflow(pay, 100).execute(idempotency_key="order-9")
        await wait_until(first, lambda d: d.status is sw.WorkflowStatus.WAITING)
        second = await manager.workflow(pay, 250).execute(
            idempotency_key="order-9", on_conflict=sw.OnConflict.TERMINATE_EXISTING
        )
        await wait_until(second, lambda d: d.status is sw.WorkflowStatus.WAITING)
        for handle in (first, second):
            for key in (await handle.describe()).children:
                await manager.get_workflow(key).result(timeout=10)
    assert [amount for amount, _ in charges] == [100, 250]
    assert charges[0][1] != charges[1][1]
    mailed = sorted(amount for amount, _ in children)
    assert mailed == [100, 250]  # the new run's child ran; it did not attach to the old one
    assert len({key for _, key in children}) == 2


async def test_swallowed_nondeterminism_error_keeps_the_workflow_suspended(db_url: str) -> None:
    """v2 renames a call and wraps it in ``except Exception``: the replay must not complete on
    the fallback."""
    v1 = make_manager(db_url)

    @v1.register_activity(name="reserve")
    async def reserve_v1() -> str:
        return "reserved"

    @v1.register_workflow(name="flow")
    async def flow_v1() -> str:
        await reserve_v1()
        return await v1.signal("go").receive(str)

    async with v1:
        handle = await v1.workflow(flow_v1).execute(idempotency_key="nd-1")
        await wait_until(handle, lambda d: d.status is sw.WorkflowStatus.WAITING)

    v2 = make_manager(db_url)

    @v2.register_activity(name="reserve_renamed")
    async def reserve_v2() -> str:
        return "reserved"

    @v2.register_workflow(name="flow")
    async def flow_v2() -> str:
        try:
            await reserve_v2()
        except Exception:
            return "fallback"
        return await v2.signal("go").receive(str)

    async with v2:
        await v2.signal("go").send("nd-1", "now")
        handle = v2.get_workflow("nd-1")
        description = await wait_until(
            handle, lambda d: d.status is not sw.WorkflowStatus.WAITING and d.error is not None
        )
    assert description.status is sw.WorkflowStatus.SUSPENDED
    assert description.error is not None
    assert description.error["type"].endswith("NonDeterminismError")


@pytest.mark.parametrize("end", ["cancel", "terminate"])
async def test_a_cancelled_child_ends_its_parent_after_compensation(db_url: str, end: str) -> None:
    manager = make_manager(db_url)
    undone: list[str] = []

    @manager.register_activity
    async def reserve() -> str:
        return "r-1"

    @manager.register_activity
    async def release(reservation: str) -> None:
        undone.append(reservation)

    @manager.register_workflow
    async def approval() -> str:
        return await manager.signal("decision").receive(str)

    @manager.register_workflow
    async def order() -> str:
        async with sw.Saga() as saga:
            reservation = await reserve()
            saga.add_compensation(release, reservation)
            return await manager.workflow(approval).execute_get(idempotency_key="approval-1")

    async with manager:
        parent = await manager.workflow(order).execute(idempotency_key="order-c")
        child = manager.get_workflow("approval-1")
        await wait_until(
            parent,
            lambda d: d.status is sw.WorkflowStatus.WAITING and d.waiting_for is not None,
        )
        await wait_until(child, lambda d: d.status is sw.WorkflowStatus.WAITING)
        if end == "cancel":
            assert await child.cancel("customer withdrew")
        else:
            assert await manager.terminate("approval-1", "operator")
        with pytest.raises(sw.WorkflowCancelled):
            await parent.result(timeout=10)
        description = await parent.describe()
    assert description.status is sw.WorkflowStatus.CANCELLED
    assert undone == ["r-1"]


async def test_a_sibling_wait_does_not_unload_a_branch_between_retries(db_url: str) -> None:
    """One branch's activity fails once and backs off; the other branch waits for a signal.
    The wait used to see nothing in flight during the backoff and unload the workflow, so the
    orphaned branch ran its next attempt unrecorded, and the replay ran it once more."""
    manager = make_manager(db_url)
    calls: list[int] = []

    @manager.register_activity(
        retry=sw.RetryPolicy(initial_interval=0.5, maximum_interval=0.5, maximum_attempts=3)
    )
    async def flaky() -> str:
        calls.append(sw.activity_info().attempt)
        if len(calls) == 1:
            raise sw.RetryableError("busy")
        return "done"

    @manager.register_workflow
    async def flow() -> list[str]:
        return list(await asyncio.gather(flaky(), manager.signal("go").receive(str)))

    async with manager:
        handle = await manager.workflow(flow).execute(idempotency_key="retry-wait")
        await wait_until(
            handle,
            lambda d: (
                d.status is sw.WorkflowStatus.WAITING
                and any(s.status is sw.StepStatus.COMPLETED for s in d.steps)
            ),
        )
        await manager.signal("go").send("retry-wait", "now")
        assert await handle.result(timeout=10) == ["done", "now"]
    assert calls == [1, 2]


UNLOADING_WRITES = {"timer": "wait_workflow", "signal": "receive_signal", "child": "wait_for_child"}


@pytest.mark.parametrize("wait", sorted(UNLOADING_WRITES))
async def test_no_activity_starts_while_a_wait_gives_the_lease_up(db_url: str, wait: str) -> None:
    """A branch's wait is all that is in flight, so it commits WAITING and gives the lease up.
    A sibling branch that reaches an activity while that write is under way must not run it:
    the workflow no longer owns its lease, so the outcome could never be recorded, and the
    next run would run the activity again. Code that gathers with ``return_exceptions=True``
    lets the sibling go on after the waiting branch has unwound, so the engine must stop it."""
    clock = FakeClock()
    manager = make_manager(db_url, clock=clock)
    writing, release, go = asyncio.Event(), asyncio.Event(), asyncio.Event()
    runs: list[str] = []

    @manager.register_activity
    async def charge() -> str:
        runs.append("charge")
        return "charged"

    @manager.register_workflow
    async def stuck_child() -> str:
        await manager.signal("never").receive(str)
        return "child"

    async def the_wait() -> Any:
        if wait == "timer":
            return await manager.sleep(3600)
        if wait == "signal":
            return await manager.signal("go").receive(str)
        return await manager.workflow(stuck_child).execute_get(idempotency_key="kid")

    async def later() -> str:
        await go.wait()  # nothing durable in flight meanwhile: the wait unloads
        return await charge()

    @manager.register_workflow
    async def flow() -> list[Any]:
        results = await asyncio.gather(the_wait(), later(), return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException):
                raise result
        return list(results)

    async with manager:
        engine_store = store_of(manager)
        write = getattr(engine_store, UNLOADING_WRITES[wait])

        async def held_write(*args: Any, **kwargs: Any) -> Any:
            if kwargs.get("wait", True):  # the unloading form of the call
                writing.set()
                await release.wait()
            return await write(*args, **kwargs)

        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(engine_store, UNLOADING_WRITES[wait], held_write)
            handle = await manager.workflow(flow).execute(idempotency_key="orphan")
            await asyncio.wait_for(writing.wait(), 10)
            go.set()  # the sibling reaches its activity while the write is under way
            for _ in range(50):
                await asyncio.sleep(0)
            release.set()
            description = await wait_until(handle, lambda d: d.status is sw.WorkflowStatus.WAITING)
        assert runs == [], "an activity ran while its workflow gave its lease up"
        assert description.owner is None

        # The wait ends: the next run replays it and runs the activity, once.
        if wait == "timer":
            await clock.advance(3600)
        elif wait == "signal":
            await manager.signal("go").send("orphan", "now")
        else:
            await manager.signal("never").send("kid", "now")
        result = await clock.run_until(handle.result())
        assert result[1] == "charged"
        assert runs == ["charge"]


async def test_no_branch_starts_an_effect_after_the_lease_was_lost(db_url: str) -> None:
    """One branch's write finds the lease gone (another process took the workflow over). A
    sibling branch that goes on (``gather(return_exceptions=True)``) must not start an activity:
    the new owner runs it too, and this process could not record it anyway."""
    manager = make_manager(db_url)
    lost, go = asyncio.Event(), asyncio.Event()
    runs: list[str] = []

    @manager.register_activity(retry=sw.RetryPolicy(initial_interval=0.01, maximum_attempts=3))
    async def reserve() -> str:
        runs.append("reserve")
        raise sw.RetryableError("busy")  # its RETRYING record is written at once

    @manager.register_activity
    async def charge() -> str:
        runs.append("charge")
        return "charged"

    async def later() -> str:
        await go.wait()
        return await charge()

    @manager.register_workflow
    async def flow() -> list[Any]:
        results = await asyncio.gather(reserve(), later(), return_exceptions=True)
        return list(results)

    async with manager:
        engine_store = store_of(manager)
        record_step = engine_store.record_step

        async def taken_over(step: Any, *, token: str) -> None:
            if step.name.endswith(".reserve"):
                lost.set()
                raise sw.LeaseLost(step.run_id)
            await record_step(step, token=token)

        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(engine_store, "record_step", taken_over)
            await manager.workflow(flow).execute(idempotency_key="taken")
            await asyncio.wait_for(lost.wait(), 10)
            go.set()
            worker = manager.worker
            assert worker is not None

            run_id = (await manager.get_workflow("taken").describe()).run_id

            async def gone() -> None:
                while True:
                    worker.execution_left.clear()
                    if not worker.is_running(run_id):
                        return
                    await worker.execution_left.wait()

            await asyncio.wait_for(gone(), 10)
        assert runs == ["reserve"], "a branch ran an activity after its lease was lost"


async def test_recovery_waits_for_a_due_run_this_process_still_holds(db_url: str) -> None:
    """A timer committed WAITING while a sibling branch still runs here (its code went on after
    the unwinding, as ``gather(return_exceptions=True)`` allows). When the timer falls due the
    run is due in the database but still held by this worker: recovery must neither spin on it
    (it rescanned every 5 ms) nor forget it, and claim it as soon as the execution leaves."""
    clock = FakeClock()
    poll = 777.0  # a duration nothing else sleeps for
    # Heartbeats far apart: the first one after the unload finds the lease gone and stops the
    # execution here, which would end the hold this test is about.
    manager = make_manager(db_url, clock=clock, poll_interval=poll, lease_timeout=600)
    release = asyncio.Event()

    async def later() -> str:
        await release.wait()  # not durable: the timer alone is in flight, so it unloads
        return "later"

    @manager.register_workflow
    async def flow() -> list[Any]:
        results = await asyncio.gather(manager.sleep(5), later(), return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException):
                raise result
        return list(results)

    async with manager:
        worker = manager.worker
        assert worker is not None
        handle = await manager.workflow(flow).execute(idempotency_key="held")
        await wait_until(handle, lambda d: d.status is sw.WorkflowStatus.WAITING)
        assert worker.is_running(handle.run_id)
        # Recovery has seen the WAITING commit and sleeps until the timer is due. (Advancing the
        # clock before that, while its scan is under way, would leave it a 5 ms sleep that a
        # clock standing still never ends: slow machines did.)
        await clock.wait_for_sleep(5)

        await clock.advance(6)  # the timer is due; the execution is still here
        # Recovery sees it due but held here, and waits (a poll, or until an execution leaves).
        await clock.wait_for_sleep(poll)
        assert worker.is_running(handle.run_id)

        release.set()  # the execution leaves: recovery claims the run at once
        # The clock stands still: only the execution's leaving can wake recovery.
        assert await asyncio.wait_for(handle.result(), 10) == [None, "later"]


async def test_recovery_takes_over_a_lease_that_expires_during_its_scan(db_url: str) -> None:
    """A dead process's lease expires while recovery scans: the claim found the run not yet
    due, the look at the next due time that follows finds it due already. No execution of this
    process holds it, so recovery must scan again at once, not wait a whole poll_interval as it
    does for a run held here (it did: a takeover then waited for the next poll)."""
    clock = FakeClock()
    poll = 777.0  # the clock stands still: a wait this long would never end
    manager = make_manager(db_url, clock=clock, poll_interval=poll, lease_timeout=5)

    @manager.register_workflow
    async def orphan() -> str:
        return "taken over"

    async with manager.connect():
        await manager.workflow(orphan).execute(idempotency_key="orphan")
        engine = engine_of(manager)
        # A process that died holding the run: its lease runs 5 s more.
        claimed = await engine.store.claim_due(
            owner="dead", now=engine.clock.now(), lease_timeout=5, limit=1, exclude=()
        )
        assert len(claimed) == 1
        store_type = type(engine.store)
    real_claim_due = store_type.claim_due
    expired: list[bool] = []

    async def claim_due_meanwhile_expiring(self: Any, **kwargs: Any) -> Any:
        found = await real_claim_due(self, **kwargs)
        if not expired:  # the first scan: nothing due yet, and the lease expires before it ends
            assert found == []
            expired.append(True)
            await clock.advance(5)
        return found

    async def tick() -> None:
        # Time moves on in small steps (a rescan sleeps 5 ms), never near a poll_interval.
        while True:
            await clock.advance(0.01)
            await asyncio.sleep(0.005)

    start = clock.now()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(store_type, "claim_due", claim_due_meanwhile_expiring)
        async with manager:
            ticking = asyncio.create_task(tick())
            try:
                result = await asyncio.wait_for(manager.get_workflow("orphan").result(), 10)
            finally:
                ticking.cancel()
    assert expired and result == "taken over"
    assert clock.now() - start < poll  # taken over long before the next poll


async def test_a_branch_left_running_after_shutdown_starts_nothing(db_url: str) -> None:
    """``gather`` does not cancel a branch when its sibling fails: the workflow catches the
    failure and sleeps in the worker, and the process shuts down meanwhile (the lease released
    for another process). The branch left running must not start an activity afterwards."""
    clock = FakeClock()
    manager = make_manager(db_url, clock=clock)
    go, branch_over = asyncio.Event(), asyncio.Event()
    runs: list[str] = []

    @manager.register_activity
    async def reserve() -> str:
        raise Declined("no stock")

    @manager.register_activity
    async def charge() -> str:
        runs.append("charge")
        return "charged"

    async def later() -> str:
        try:
            await go.wait()
            return await charge()
        finally:
            branch_over.set()

    @manager.register_workflow
    async def flow() -> str:
        try:
            await asyncio.gather(reserve(), later())
        except Declined:
            await manager.sleep(0.5)  # short: it sleeps in the worker, the workflow loaded
        return "done"

    async with manager:
        await manager.workflow(flow).execute(idempotency_key="left-over")
        await clock.wait_for_sleep(0.5)
    # The Manager is closed; the branch goes on.
    go.set()
    await asyncio.wait_for(branch_over.wait(), 10)
    assert runs == [], "a branch left running started an activity after shutdown"


async def test_every_workflow_waiting_on_a_shared_child_key_is_woken(db_url: str) -> None:
    """Two workflows wait for the child under one key their code chose: the one that created
    it, and one that attached to it. When the child ends, both must go on."""
    manager = make_manager(db_url)

    @manager.register_workflow
    async def shared() -> str:
        return await manager.signal("go").receive(str)

    @manager.register_workflow
    async def waiter(label: str) -> str:
        value: str = await manager.workflow(shared).execute_get(idempotency_key="shared-child")
        return f"{label}:{value}"

    async with manager:
        first = await manager.workflow(waiter, "first").execute(idempotency_key="first")
        await wait_until(first, lambda d: d.status is sw.WorkflowStatus.WAITING)
        second = await manager.workflow(waiter, "second").execute(idempotency_key="second")
        await wait_until(second, lambda d: d.status is sw.WorkflowStatus.WAITING)
        await manager.signal("go").send("shared-child", "done")
        assert await first.result(timeout=10) == "first:done"
        assert await second.result(timeout=3) == "second:done"


async def test_a_workflow_attached_to_a_top_level_workflow_is_woken_by_its_end(
    db_url: str,
) -> None:
    """A client starts a workflow under a key; a workflow then waits for it as its child under
    the same key (same name and arguments: it attaches). The top-level end, which no parent
    waits for, still wakes it."""
    manager = make_manager(db_url)

    @manager.register_workflow
    async def approval() -> str:
        return await manager.signal("go").receive(str)

    @manager.register_workflow
    async def follower() -> str:
        value: str = await manager.workflow(approval).execute_get(idempotency_key="approval-1")
        return f"followed:{value}"

    async with manager:
        leader = await manager.workflow(approval).execute(idempotency_key="approval-1")
        await wait_until(leader, lambda d: d.status is sw.WorkflowStatus.WAITING)
        attached = await manager.workflow(follower).execute(idempotency_key="follower-1")
        await wait_until(attached, lambda d: d.status is sw.WorkflowStatus.WAITING)
        assert (await leader.describe()).parent_key is None  # it stays top-level
        await manager.signal("go").send("approval-1", "yes")
        assert await leader.result(timeout=10) == "yes"
        assert await attached.result(timeout=10) == "followed:yes"


async def test_cancelling_a_workflow_does_not_cancel_one_it_only_attached_to(db_url: str) -> None:
    """A cancelled workflow asks the children it started to cancel, not a workflow it merely
    waits for under a shared key: that one belongs to whoever started it (here a parent that
    created it, and a client), and must go on for them."""
    manager = make_manager(db_url)

    @manager.register_workflow
    async def shared() -> str:
        return await manager.signal("go").receive(str)

    @manager.register_workflow
    async def waiter(key: str) -> str:
        value: str = await manager.workflow(shared).execute_get(idempotency_key=key)
        return value

    async with manager:
        owner = await manager.workflow(waiter, "child-1").execute(idempotency_key="owner")
        await wait_until(owner, lambda d: d.status is sw.WorkflowStatus.WAITING)
        top = await manager.workflow(shared).execute(idempotency_key="top-1")
        for key in ("child-1", "top-1"):
            attached = await manager.workflow(waiter, key).execute(idempotency_key=f"on-{key}")
            await wait_until(attached, lambda d: d.status is sw.WorkflowStatus.WAITING)
            assert await attached.cancel("no longer wanted")
            with pytest.raises(sw.WorkflowCancelled):
                await attached.result(timeout=10)
        for key in ("child-1", "top-1"):
            described = await manager.get_workflow(key).describe()
            assert described.status is sw.WorkflowStatus.WAITING, key
            await manager.signal("go").send(key, "still wanted")
        assert await owner.result(timeout=10) == "still wanted"
        assert await top.result(timeout=10) == "still wanted"
        # Its owner's cancel still reaches a child.
        owner2 = await manager.workflow(waiter, "child-2").execute(idempotency_key="owner-2")
        await wait_until(owner2, lambda d: d.status is sw.WorkflowStatus.WAITING)
        assert await owner2.cancel("stop")
        with pytest.raises(sw.WorkflowCancelled):
            await owner2.result(timeout=10)
        child = manager.get_workflow("child-2")
        with pytest.raises(sw.WorkflowCancelled):
            await child.result(timeout=10)


def _define_refusing_parent(manager: sw.Manager) -> None:
    @manager.register_workflow(name="kid")
    async def kid(name: str) -> str:
        return name

    async def refused(key: str, errors: list[str]) -> None:
        try:
            await manager.workflow(kid, "never").execute(idempotency_key=key)
        except ValueError as error:
            errors.append(str(error))

    @manager.register_workflow(name="parent")
    async def parent() -> list[str]:
        errors: list[str] = []
        for key in ("p/3", "p%2F1/1", "p/2/1"):  # calls 1-3
            await refused(key, errors)
        first: str = await manager.workflow(kid, "a").execute_get()  # call 4: p/4
        for key in ("p/4", "p/1"):  # calls 5-6
            await refused(key, errors)
        await manager.signal("go").receive(str)  # the process restarts here
        named: str = await manager.workflow(kid, "b").execute_get(idempotency_key="p/4-child")
        deeper: str = await manager.workflow(kid, "c").execute_get(idempotency_key="p/1/x")
        return [first, named, deeper, *errors]


async def test_a_chosen_child_key_of_the_derived_form_is_refused(db_url: str) -> None:
    """The engine derives ``p/1`` for the first child of ``p``; a key chosen by workflow code
    in that form (``<key>/<call number>``, of this workflow or of another in its tree) could
    name another call's child, so it is refused with a ValueError before anything is written,
    in either order: before the call that would derive it (``p/3``) and after (``p/1``). A
    refused call takes a call number, the same one when the workflow runs again in another
    process. Found by the generative test (its ``<own key>/<n>`` child keys): the second start
    raised IdempotencyConflict and the parent was suspended."""
    first = make_manager(db_url)
    _define_refusing_parent(first)
    async with first:
        handle = await first.workflow("parent").execute(idempotency_key="p")
        await wait_until(handle, lambda d: d.waiting_for == "signal:go")
    second = make_manager(db_url)
    _define_refusing_parent(second)
    async with second:
        await second.signal("go").send("p", "now")
        handle = second.get_workflow("p")
        result = await handle.result(timeout=10)
        assert result[:3] == ["a", "b", "c"]
        refused = result[3:]
        assert len(refused) == 5
        assert "child key 'p/3' has the form <key>/<call number>" in refused[0]
        assert "call 1 of workflow 'p/1'" in refused[1]
        assert "call 2/1 of workflow 'p'" in refused[2]
        assert "for example 'p/4-child'" in refused[3]
        children = sorted((await handle.describe()).children)
        assert children == ["p/1/x", "p/4", "p/4-child"]
        listed = {record.key for record in await second.list_workflows()}
        assert listed == {"p", "p/1/x", "p/4", "p/4-child"}


async def test_a_parent_resumes_when_its_child_ends_not_at_the_next_poll(db_url: str) -> None:
    """The parent unloads to wait for its child; the child's end makes it due and wakes this
    process's Recovery Worker (SQLite has no notices), so nothing waits for a poll an hour
    away."""
    manager = make_manager(db_url, poll_interval=3600.0)

    @manager.register_workflow
    async def child() -> str:
        return await manager.signal("go").receive(str)

    @manager.register_workflow
    async def parent() -> str:
        value: str = await manager.workflow(child).execute_get(idempotency_key="the-child")
        return f"parent:{value}"

    async with manager:
        handle = await manager.workflow(parent).execute(idempotency_key="the-parent")
        await wait_until(handle, lambda d: d.status is sw.WorkflowStatus.WAITING)
        await manager.signal("go").send("the-child", "done")
        assert await handle.result(timeout=10) == "parent:done"


@dataclasses.dataclass(frozen=True, kw_only=True)
class _TaggedPolicy(sw.RetryPolicy):
    """A user's policy subclass with a field that cannot be hashed."""

    tags: list[str] = dataclasses.field(default_factory=list)


async def test_a_compensation_runs_under_a_policy_subclass_that_cannot_be_hashed(
    db_url: str,
) -> None:
    """A compensation retries until it succeeds: the engine makes a copy of the activity's
    policy without an attempt limit (cached for the plain RetryPolicy, which hashes)."""
    manager = make_manager(db_url)
    undone: list[str] = []

    @manager.register_activity
    async def reserve() -> str:
        return "r-1"

    @manager.register_activity(retry=_TaggedPolicy(tags=["stock"], maximum_attempts=1))
    async def release(reservation: str) -> None:
        undone.append(reservation)

    @manager.register_activity
    async def charge() -> None:
        raise Declined("card declined")

    @manager.register_workflow
    async def order() -> str:
        try:
            async with sw.Saga() as saga:
                saga.add_compensation(release, await reserve())
                await charge()
        except Declined:
            return "compensated"
        return "completed"

    async with manager:
        handle = await manager.workflow(order).execute(idempotency_key="order-tagged")
        assert await handle.result(timeout=10) == "compensated"
    assert undone == ["r-1"]
