"""Durable agent runs (sagaway.agents) on the four backends, with Pydantic AI's function model.

The travel agent of examples/travel_agent books a flight, a hotel and (after a person's
approval) a car, each a tool with its compensation. What it books and cancels is counted from
its ledger file; what the model is asked, from the requests the model function sees.
"""

from __future__ import annotations

import asyncio
import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest

import sagaway as sw
from sagaway.agents import Approval, ApprovalRejected, ApprovalTimedOut
from sagaway.testing import FakeClock, time_skipping_manager

ROOT = Path(__file__).resolve().parents[2]


def load_travel() -> Any:
    path = ROOT / "examples" / "travel_agent" / "app.py"
    spec = importlib.util.spec_from_file_location("example_travel_agent", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve their module's annotations
    spec.loader.exec_module(module)
    return module


travel = load_travel()


async def status_is(handle: sw.WorkflowHandle[Any], status: sw.WorkflowStatus) -> None:
    async def poll() -> None:
        while True:
            if (await handle.status()) is status:
                return
            await asyncio.sleep(0.01)

    await asyncio.wait_for(poll(), 20)


def setup(
    db_url: str, tmp_path: Path, clock: FakeClock | None = None, **agency: Any
) -> tuple[sw.Manager, Any, Any, list[int]]:
    manager = (
        sw.Manager(db_url, poll_interval=0.05)
        if clock is None
        else time_skipping_manager(db_url, clock)
    )
    requests: list[int] = []

    async def count(n: int) -> None:
        requests.append(n)

    ledger = travel.Agency(tmp_path / "ledger.txt", **agency)
    workflow = travel.build(manager, ledger, travel.scripted_model(count))
    return manager, ledger, workflow, requests


async def test_a_failure_after_two_tools_compensates_both_in_reverse_once(
    db_url: str, tmp_path: Path
) -> None:
    manager, agency, plan_trip, requests = setup(db_url, tmp_path, sold_out=frozenset({"car"}))
    async with manager:
        handle = await manager.workflow(plan_trip, "Oslo").execute(idempotency_key="t1")
        await status_is(handle, sw.WorkflowStatus.WAITING)  # the car needs approval
        await manager.signal("approval").send("t1", Approval(approved=True))
        with pytest.raises(travel.SoldOut):
            await handle.result(timeout=20)
        steps = (await handle.describe()).steps
    assert agency.lines() == [
        "book flight Oslo",
        "book hotel Oslo",
        "sold out car",
        "cancel hotel Oslo",
        "cancel flight Oslo",
    ]
    assert requests == [0, 1, 2]  # each model request sent once
    names = [step.name for step in steps]
    assert names.count("travel.model_request") == 3
    assert [s.name for s in steps if s.kind is sw.StepKind.COMPENSATION] == [
        "travel.cancel_hotel",
        "travel.cancel_flight",
    ]
    # The response is the step's output, as pydantic dumps it (JSON), with the tool call.
    first = steps[names.index("travel.model_request")].result
    assert first["parts"][0]["tool_name"] == "book_flight"


async def test_an_approved_run_books_all_and_a_replay_sends_nothing_again(
    db_url: str, tmp_path: Path
) -> None:
    manager, agency, plan_trip, requests = setup(db_url, tmp_path)
    # The hotel fails once with an unexpected error: the run is suspended, then run again
    # from the top; recorded requests and tool calls come back from the record.
    failures = ["hotel"]

    async def before(kind: str) -> None:
        if kind in failures:
            failures.remove(kind)
            raise RuntimeError("agency unreachable")

    agency.before_booking = before
    async with manager:
        handle = await manager.workflow(plan_trip, "Rome").execute(idempotency_key="t2")
        await status_is(handle, sw.WorkflowStatus.SUSPENDED)
        await manager.retry("t2")
        await status_is(handle, sw.WorkflowStatus.WAITING)
        description = await handle.describe()
        asked = [s.result for s in description.steps if s.name == "travel.approval_request"]
        assert asked == [
            {"tool": "book_car", "args": {"city": "Rome"}, "signal": "approval", "timeout": 3600.0}
        ]
        await manager.signal("approval").send("t2", {"approved": True})
        assert await handle.result(timeout=20) == "Your trip to Rome is booked."
    assert agency.lines() == ["book flight Rome", "book hotel Rome", "book car Rome"]
    assert requests == [0, 1, 2, 3]


async def test_an_approval_rejected_compensates(db_url: str, tmp_path: Path) -> None:
    manager, agency, plan_trip, requests = setup(db_url, tmp_path)
    async with manager:
        handle = await manager.workflow(plan_trip, "Bern").execute(idempotency_key="t3")
        await status_is(handle, sw.WorkflowStatus.WAITING)
        await manager.signal("approval").send("t3", Approval(approved=False, note="too dear"))
        with pytest.raises(ApprovalRejected, match="too dear"):
            await handle.result(timeout=20)
        assert (await handle.status()) is sw.WorkflowStatus.FAILED
    assert agency.lines() == [
        "book flight Bern",
        "book hotel Bern",
        "cancel hotel Bern",
        "cancel flight Bern",
    ]
    assert requests == [0, 1, 2]


async def test_an_approval_that_times_out_compensates(db_url: str, tmp_path: Path) -> None:
    clock = FakeClock()
    manager, agency, plan_trip, _ = setup(db_url, tmp_path, clock)
    async with manager:
        handle = await manager.workflow(plan_trip, "Riga").execute(idempotency_key="t4")
        started = clock.now()
        with pytest.raises(ApprovalTimedOut):
            await clock.run_until(handle.result())
        assert clock.now() - started >= 3600
    assert agency.lines() == [
        "book flight Riga",
        "book hotel Riga",
        "cancel hotel Riga",
        "cancel flight Riga",
    ]


async def test_a_cancel_during_a_tool_compensates_it_and_the_ones_before(
    db_url: str, tmp_path: Path
) -> None:
    manager, agency, plan_trip, requests = setup(db_url, tmp_path)
    in_hotel, release = asyncio.Event(), asyncio.Event()

    async def before(kind: str) -> None:
        if kind == "hotel":
            in_hotel.set()
            await release.wait()

    agency.before_booking = before
    async with manager:
        handle = await manager.workflow(plan_trip, "Kyiv").execute(idempotency_key="t5")
        await asyncio.wait_for(in_hotel.wait(), 20)
        assert await handle.cancel("change of plans")
        release.set()  # the booking in flight completes, then the run sees the cancel
        with pytest.raises(sw.WorkflowCancelled):
            await handle.result(timeout=20)
    assert agency.lines() == [
        "book flight Kyiv",
        "book hotel Kyiv",
        "cancel hotel Kyiv",
        "cancel flight Kyiv",
    ]
    assert requests == [0, 1]  # no request after the cancel
