"""Pausing a workflow, an activity and an activity queue, and resuming them (four backends).

A paused workflow stops before its next durable call (an activity already running finishes and
is recorded), holds no lease, is claimed by no worker, and runs on from there once resumed. A
paused activity or queue starts no new attempt anywhere: a workflow reaching one waits without
using an attempt of its retry policy and goes on when it is resumed.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import sagaway as sw


async def until(check: Any, what: str) -> None:
    """Poll the async ``check()`` until it holds (10 s bound; no fixed sleep decides)."""

    async def poll() -> None:
        while not await check():  # noqa: ASYNC110  (state in the database: polled)
            await asyncio.sleep(0.02)

    try:
        await asyncio.wait_for(poll(), 10)
    except TimeoutError:
        raise AssertionError(f"timed out waiting until {what}") from None


def make_manager(db_url: str) -> sw.Manager:
    return sw.Manager(db_url, poll_interval=0.05, queues={"payments": sw.Queue(concurrency=4)})


def define(manager: sw.Manager, calls: list[str], gate: asyncio.Event) -> Any:
    @manager.register_activity(name="first")
    async def first() -> str:
        calls.append("first")
        await gate.wait()
        return "1"

    @manager.register_activity(
        name="charge", queue="payments", retry=sw.RetryPolicy(maximum_attempts=1)
    )
    async def charge() -> str:
        calls.append("charge")
        return "charged"

    @manager.register_workflow(name="waiter")
    async def waiter() -> str:
        return str(await manager.signal("go").receive(str))

    @manager.register_workflow(name="flow")
    async def flow() -> list[str]:
        one = await manager.activity(first).execute_get()
        two = await manager.activity(charge).execute_get()
        return [one, two]

    return flow


async def test_pause_stops_before_next_call_and_resume_continues(db_url: str) -> None:
    calls: list[str] = []
    gate = asyncio.Event()
    manager = make_manager(db_url)
    flow = define(manager, calls, gate)
    async with manager:
        handle = await manager.workflow(flow).execute(idempotency_key="p-1")
        await until(lambda: _has(calls, "first"), "the first activity runs")
        assert await handle.pause(reason="incident 7") is True
        gate.set()  # the running activity finishes, and is recorded
        await until(lambda: _released(handle), "the paused workflow gives its lease up")
        # A witness made due after the release is claimed by the Recovery Worker, which
        # leaves the paused workflow (due as well) alone.
        witness = await manager.workflow("waiter").execute(idempotency_key="p-1-witness")
        await until(lambda: _waiting(witness), "the witness waits")
        await manager.signal("go").send("p-1-witness", "ok")
        assert await witness.result(timeout=10) == "ok"
        described = await handle.describe()
        assert described.paused and described.owner is None
        assert [s.name for s in described.steps] == ["first"]
        assert "charge" not in calls
        assert await handle.resume() is True
        assert await handle.result(timeout=10) == ["1", "charged"]
        assert calls == ["first", "charge"]
        assert await handle.resume() is False  # not paused
        assert await handle.pause() is False  # ended
        actions = [e.action for e in (await handle.describe()).audit]
        assert "pause" in actions and "resume" in actions


async def test_pause_activity_holds_new_attempts_without_using_retries(db_url: str) -> None:
    calls: list[str] = []
    gate = asyncio.Event()
    gate.set()
    manager = make_manager(db_url)
    flow = define(manager, calls, gate)
    async with manager:
        assert await manager.pause_activity("charge", reason="provider down") is True
        assert await manager.pause_activity("charge") is False  # already
        paused = await manager.paused_calls()
        assert [(p.kind, p.name, p.reason) for p in paused] == [
            ("activity", "charge", "provider down")
        ]
        handle = await manager.workflow(flow).execute(idempotency_key="p-2")
        await until(lambda: _waiting(handle), "the workflow waits for the paused activity")
        assert calls == ["first"]
        described = await handle.describe()
        assert described.owner is None
        assert [s.name for s in described.steps] == ["first"]  # no attempt recorded
        assert await manager.resume_activity("charge") is True
        # One attempt allowed by its policy: the pause used none of it.
        assert await handle.result(timeout=10) == ["1", "charged"]
        assert calls == ["first", "charge"]
        steps = (await handle.describe()).steps
        assert steps[-1].attempts == 1


async def test_pause_queue(db_url: str) -> None:
    calls: list[str] = []
    gate = asyncio.Event()
    gate.set()
    manager = make_manager(db_url)
    flow = define(manager, calls, gate)
    async with manager:
        assert await manager.pause_queue("payments") is True
        handle = await manager.workflow(flow).execute(idempotency_key="p-3")
        await until(lambda: _waiting(handle), "the workflow waits for the paused queue")
        assert calls == ["first"]
        assert await manager.resume_queue("payments") is True
        assert await manager.resume_queue("payments") is False
        assert await handle.result(timeout=10) == ["1", "charged"]
        assert await manager.paused_calls() == []


async def test_pause_misuse(db_url: str) -> None:
    manager = make_manager(db_url)
    async with manager.connect():
        with pytest.raises(sw.WorkflowNotFound):
            await manager.pause("nobody")
        with pytest.raises(ValueError):
            await manager.pause_activity("")


async def _has(calls: list[str], name: str) -> bool:
    return name in calls


async def _released(handle: sw.WorkflowHandle[Any]) -> bool:
    described = await handle.describe()
    return described.paused and described.owner is None


async def _waiting(handle: sw.WorkflowHandle[Any]) -> bool:
    return (await handle.status()) is sw.WorkflowStatus.WAITING
