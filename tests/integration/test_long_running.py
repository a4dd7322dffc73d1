"""Signals, durable timers and child workflows, on every backend."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import pytest

import sagaway as sw
from sagaway.testing import FakeClock, time_skipping_manager


@dataclasses.dataclass(frozen=True)
class Approval:
    ok: bool
    reviewer: str = "anon"


def make_manager(db_url: str, **options: Any) -> sw.Manager:
    options.setdefault("poll_interval", 0.05)
    return sw.Manager(db_url, **options)


async def wait_status(
    handle: sw.WorkflowHandle[Any], status: sw.WorkflowStatus
) -> sw.WorkflowDescription:
    async def poll() -> sw.WorkflowDescription:
        while True:
            description = await handle.describe()
            if description.status is status:
                return description
            await asyncio.sleep(0.01)

    return await asyncio.wait_for(poll(), 10)


async def test_waiting_workflow_holds_no_worker_and_resumes_on_signal(db_url: str) -> None:
    manager = make_manager(db_url)

    @manager.register_workflow
    async def review() -> Approval:
        return await manager.signal("approval").receive(Approval)

    async with manager:
        handle = await manager.workflow(review).execute(idempotency_key="kyc-1")
        d = await wait_status(handle, sw.WorkflowStatus.WAITING)
        assert d.owner is None and d.waiting_for == "signal:approval"
        assert manager.worker is not None and manager.worker.running_ids == set()
        assert await manager.signal("approval").send("kyc-1", Approval(ok=True, reviewer="rin"))
        assert await handle.result(timeout=10) == Approval(ok=True, reviewer="rin")


async def test_early_duplicate_and_ordered_signals(db_url: str) -> None:
    manager = make_manager(db_url)
    gate = asyncio.Event()

    @manager.register_activity
    async def wait_gate() -> None:
        await gate.wait()

    @manager.register_workflow
    async def collect() -> list[str]:
        await wait_gate()
        got = [await manager.signal("note").receive(str) for _ in range(2)]
        try:
            await manager.signal("note").receive(str, timeout=0)
        except sw.SignalTimeout:
            got.append("timeout")
        return got

    async with manager:
        handle = await manager.workflow(collect).execute(idempotency_key="c")
        # Sent before the workflow reaches receive: kept and delivered in order, once.
        note = manager.signal("note")
        assert await note.send("c", "first", dedupe_id="d1")
        assert not await note.send("c", "first again", dedupe_id="d1")
        assert await note.send("c", "second", dedupe_id="d2")
        gate.set()
        assert await handle.result(timeout=10) == ["first", "second", "timeout"]
        with pytest.raises(sw.SagawayError, match="has ended"):
            await note.send("c", "late")
        # A callback retried after the end: already sent, not an error.
        assert not await note.send("c", "first", dedupe_id="d1")
        with pytest.raises(sw.SagawayError, match="has ended"):
            await note.send("c", "late", dedupe_id="d3")
        with pytest.raises(sw.SagawayError, match="has ended"):  # d1 of another signal name
            await manager.signal("other").send("c", "late", dedupe_id="d1")
        with pytest.raises(sw.WorkflowNotFound):
            await note.send("nobody", "x")


async def test_signal_timeout_raises_in_the_workflow(db_url: str) -> None:
    clock = FakeClock()
    manager = time_skipping_manager(db_url, clock)

    @manager.register_workflow
    async def approve() -> str:
        try:
            decision = await manager.signal("approval").receive(Approval, timeout=86400)
        except sw.SignalTimeout:
            return "expired"
        return "approved" if decision.ok else "rejected"

    async with manager:
        handle = await manager.workflow(approve).execute()
        started = clock.now()
        assert await clock.run_until(handle.result()) == "expired"
        assert clock.now() - started >= 86400
        steps = (await handle.describe()).steps
    assert steps[0].kind is sw.StepKind.SIGNAL and steps[0].status is sw.StepStatus.FAILED


async def test_malformed_signal_is_rejected_and_kept(db_url: str) -> None:
    manager = make_manager(db_url)

    @manager.register_workflow
    async def review() -> Approval:
        return await manager.signal("approval").receive(Approval)

    async with manager:
        handle = await manager.workflow(review).execute(idempotency_key="m")
        await wait_status(handle, sw.WorkflowStatus.WAITING)
        await manager.signal("approval").send("m", {"ok": "not-a-bool"})
        await manager.signal("approval").send("m", {"ok": False})
        assert await handle.result(timeout=10) == Approval(ok=False)
        signals = await manager.list_signals("m")
    assert [s.rejected is not None for s in signals] == [True, False]
    assert "does not fit" in (signals[0].rejected or "")


async def test_three_day_timer_fires_when_the_clock_gets_there(db_url: str) -> None:
    clock = FakeClock()
    manager = time_skipping_manager(db_url, clock)

    @manager.register_workflow
    async def remind() -> str:
        await manager.sleep(3 * 86400)
        return "reminded"

    async with manager:
        started = clock.now()
        handle = await manager.workflow(remind).execute()
        d = await wait_status(handle, sw.WorkflowStatus.WAITING)
        assert d.waiting_for == "timer" and d.owner is None
        await clock.advance(86400)
        assert await handle.status() is sw.WorkflowStatus.WAITING
        assert await clock.run_until(handle.result()) == "reminded"
    assert clock.now() - started >= 3 * 86400


async def test_a_timer_fires_on_time_whatever_the_poll_interval(db_url: str) -> None:
    """Recovery planned its next scan a poll interval ahead when the workflow started; the
    timer's unload must bring that scan forward, or the timer fires up to a poll late."""
    clock = FakeClock()
    manager = sw.Manager(db_url, clock=clock, poll_interval=3600)

    @manager.register_workflow
    async def remind() -> str:
        await manager.sleep(5)
        return "reminded"

    async with manager:
        handle = await manager.workflow(remind).execute()
        await wait_status(handle, sw.WorkflowStatus.WAITING)
        # Recovery now plans its scan for the timer's end (PostgreSQL: in server time).
        await clock.wait_for_sleep(lambda s: 4.9 < s < 5.1)
        # A little past the timer: the server-time offset may put the planned scan a few ulps
        # after it. A scan already under way when time jumps (woken by something else) plans
        # its next look a few milliseconds on, so time then creeps in small steps, as real
        # time would: 10 real seconds reach about 20 s of fake time, nowhere near the next poll
        # (an hour), so a scan planned for the poll times out here.
        await clock.advance(5.1)
        assert await clock.run_until(handle.result(), max_jump=0.01) == "reminded"


async def test_child_fire_and_forget_and_durable_child_result(db_url: str) -> None:
    manager = make_manager(db_url)
    release = asyncio.Event()

    @manager.register_activity
    async def publish(event: str) -> str:
        await release.wait()
        return f"published {event}"

    @manager.register_workflow
    async def publisher(event: str) -> str:
        return await publish(event)

    @manager.register_workflow
    async def activate(line: str) -> str:
        await manager.workflow(publisher, f"activated {line}").execute()  # fire-and-forget
        return "accepted"

    @manager.register_workflow
    async def activate_and_wait(line: str) -> str:
        return await manager.workflow(publisher, f"waited {line}").execute_get()

    async with manager:
        assert (
            await manager.workflow(activate, "080").execute_get(idempotency_key="a", timeout=10)
            == "accepted"
        )
        child = manager.get_workflow("a/1")
        assert (await child.describe()).parent_key == "a"
        assert (await manager.get_workflow("a").describe()).children == ["a/1"]
        waiting = await manager.workflow(activate_and_wait, "090").execute(idempotency_key="b")
        d = await wait_status(waiting, sw.WorkflowStatus.WAITING)
        assert d.waiting_for == "child:b/1"
        release.set()
        assert await child.result(timeout=10) == "published activated 080"
        assert await waiting.result(timeout=10) == "published waited 090"


async def test_child_failure_reaches_the_parent(db_url: str) -> None:
    manager = make_manager(db_url)

    class Rejected(sw.CompletableError):
        """Rejected."""

    @manager.register_workflow
    async def child() -> None:
        raise Rejected("no", code="NO")

    @manager.register_workflow
    async def parent() -> str:
        try:
            await manager.workflow(child).execute_get()
        except Rejected as exc:
            return f"child said {exc.code}"
        return "unreachable"

    async with manager:
        assert await manager.workflow(parent).execute_get(timeout=10) == "child said NO"
