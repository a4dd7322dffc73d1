"""A BaseException raised by activity code is the activity's error, not the worker's end.

``sys.exit()`` in a sync activity used to stop the worker process (and every process that
claimed the workflow next); a ``CancelledError`` escaping an async activity made the workflow
run again in a loop. Both must be recorded and SUSPEND the workflow, while the process goes on;
a real cancel of the workflow (cancel, shutdown, timeout) must stay a cancel.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import pytest

import sagaway as sw


def make_manager(db_url: str, **options: Any) -> sw.Manager:
    options.setdefault("poll_interval", 0.05)
    return sw.Manager(db_url, **options)


def _raise(kind: str) -> None:
    if kind == "SystemExit":
        sys.exit(3)
    if kind == "KeyboardInterrupt":
        raise KeyboardInterrupt
    if kind == "GeneratorExit":
        raise GeneratorExit
    raise asyncio.CancelledError("raised by the activity")


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


@pytest.mark.parametrize("style", ["sync", "async", "async with timeout"])
@pytest.mark.parametrize("kind", ["SystemExit", "KeyboardInterrupt", "GeneratorExit", "Cancelled"])
async def test_a_base_exception_from_an_activity_suspends_the_workflow(
    db_url: str, kind: str, style: str
) -> None:
    manager = make_manager(db_url)
    calls: list[str] = []

    @manager.register_activity
    def sync_bad() -> None:
        calls.append("bad")
        _raise(kind)

    @manager.register_activity
    async def async_bad() -> None:
        calls.append("bad")
        await asyncio.sleep(0)
        _raise(kind)

    @manager.register_workflow
    async def flow() -> str:
        timeout = 30.0 if style == "async with timeout" else None
        bad = sync_bad if style == "sync" else async_bad
        try:
            await manager.activity(bad).execute_get(timeout=timeout)
        except Exception:
            return "swallowed"  # incompletable: the run is doomed all the same
        return "unreachable"

    @manager.register_workflow
    async def fine(n: int) -> int:
        return n + 1

    async with manager:
        handle = await manager.workflow(flow).execute(idempotency_key="bad")
        d = await wait_status(handle, sw.WorkflowStatus.SUSPENDED)
        # The process goes on serving other workflows.
        assert await manager.workflow(fine, 41).execute_get(idempotency_key="fine") == 42
    assert calls == ["bad"]  # not run again in a loop
    assert d.error is not None and d.error["type"] == "sagaway.errors.ActivityAborted"
    name = "CancelledError" if kind == "Cancelled" else kind
    assert f"raised {name}(" in d.error["message"]
    [step] = d.steps
    assert step.status is sw.StepStatus.ERROR and step.error is not None
    assert step.error["type"] == "sagaway.errors.ActivityAborted"
    assert name in step.error["traceback"]  # the original, as the cause


@pytest.mark.parametrize("timeout", [None, 30.0])
async def test_a_real_cancel_during_an_async_activity_stays_a_cancel(
    db_url: str, timeout: float | None
) -> None:
    """Terminating the workflow cancels its task, the activity's await included: that is no
    activity error."""
    manager = make_manager(db_url)
    entered = asyncio.Event()

    @manager.register_activity
    async def block() -> None:
        entered.set()
        await asyncio.Event().wait()

    @manager.register_workflow
    async def flow() -> None:
        await manager.activity(block).execute_get(timeout=timeout)

    async with manager:
        handle = await manager.workflow(flow).execute(idempotency_key="c")
        await entered.wait()
        assert await manager.terminate(handle.key)
        with pytest.raises(sw.WorkflowCancelled):
            await handle.result(timeout=10)
        d = await handle.describe()
    assert d.status is sw.WorkflowStatus.TERMINATED
    assert [s.status for s in d.steps] == []  # no activity error recorded


@pytest.mark.parametrize("timeout", [None, 30.0])
async def test_shutdown_during_an_async_activity_releases_the_workflow(
    db_url: str, timeout: float | None
) -> None:
    entered = asyncio.Event()
    blocking = {"on": True}

    def build() -> tuple[sw.Manager, Any]:
        manager = make_manager(db_url)

        @manager.register_activity
        async def step() -> str:
            if blocking["on"]:
                entered.set()
                await asyncio.Event().wait()
            return "done"

        @manager.register_workflow
        async def flow() -> str:
            return await manager.activity(step).execute_get(timeout=timeout)

        return manager, flow

    first, flow = build()
    async with first:
        await first.workflow(flow).execute(idempotency_key="s")
        await entered.wait()
    # Shut down mid-activity: released, not suspended; the next process runs it again.
    blocking["on"] = False
    second, _ = build()
    async with second:
        handle = second.get_workflow("s")
        assert await handle.result(timeout=10) == "done"
        d = await handle.describe()
    assert d.suspend_count == 0 and [s.status for s in d.steps] == [sw.StepStatus.COMPLETED]
