"""Durable agent runs (sagaway.agents) on the four backends, with Pydantic AI's function model.

The travel agent of examples/travel_agent books a flight, a hotel and (after a person's
approval) a car, each a tool with its compensation. What it books and cancels is counted from
its ledger file; what the model is asked, from the requests the model function sees.
"""

from __future__ import annotations

import asyncio
import html
import importlib.util
import re
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent, ModelRetry
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import UsageLimits

import sagaway as sw
from sagaway.agents import (
    AgentFailed,
    Approval,
    ApprovalRejected,
    ApprovalTimedOut,
    DurableAgent,
    TextDelta,
    model_responses,
)
from sagaway.testing import FakeClock, time_skipping_manager

ROOT = Path(__file__).resolve().parents[2]


def load_travel() -> Any:
    # Loaded once per process: its error classes are found by module name when a recorded
    # error is read back, so every test must raise and catch the same ones.
    if "example_travel_agent" in sys.modules:
        return sys.modules["example_travel_agent"]
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
        description = await handle.describe()
    steps = description.steps
    # What a client reads of the run: the model's responses, as recorded, decoded.
    responses = model_responses(description, "travel")
    assert [r.tool_calls[0].tool_name for r in responses] == list(travel.PLAN)
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


class Full(sw.CompletableError):
    """No room left."""


def parallel_agent(
    manager: sw.Manager, log: list[str], *, fail: str | None
) -> tuple[Any, asyncio.Event]:
    """One response calls ``slow``, ``fast`` and ``plain`` (a tool of the agent itself, not
    declared: it asks the model to retry once) at once; ``fail`` names the one that fails."""
    slow_started = asyncio.Event()

    def script(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        asked = sum(isinstance(m, ModelRequest) for m in messages)
        log.append(f"model {asked}")
        if asked == 1:
            calls = [
                ToolCallPart(name, {"x": n}) for n, name in enumerate(["slow", "fast", "plain"])
            ]
            return ModelResponse(parts=calls)
        return ModelResponse(parts=[TextPart("done")])

    agent: Agent[None, str] = Agent(FunctionModel(script))
    durable = DurableAgent(manager, agent, name="par", parallel_tools=True)

    @manager.register_activity(name="par.undo")
    async def undo(value: int) -> None:
        log.append(f"undo {value}")

    @durable.tool(compensate=undo)
    async def slow(x: int) -> int:
        slow_started.set()
        await asyncio.sleep(0.2)  # still running when `fast` fails: it is let finish
        log.append("slow")
        return x

    @durable.tool(compensate=undo)
    async def fast(x: int) -> int:
        await slow_started.wait()
        if fail == "fast":
            raise Full("no room")
        log.append("fast")
        return x

    retried: list[int] = []

    @agent.tool_plain
    async def plain(x: int) -> dict[str, int]:
        if not retried:
            retried.append(x)
            raise ModelRetry("once more")
        return {"x": x}

    @manager.register_workflow(name="par.flow")
    async def flow() -> str:
        return (await durable.run("go")).output

    return flow, slow_started


@pytest.mark.parametrize("fail", [None, "fast"])
async def test_parallel_tool_calls_finish_before_a_failure_compensates(
    db_url: str, fail: str | None
) -> None:
    manager = sw.Manager(db_url, poll_interval=0.05)
    log: list[str] = []
    flow, _ = parallel_agent(manager, log, fail=fail)
    async with manager:
        handle = await manager.workflow(flow).execute(idempotency_key="p1")
        if fail is None:
            assert await handle.result(timeout=20) == "done"
        else:
            with pytest.raises(Full):
                await handle.result(timeout=20)
        steps = (await handle.describe()).steps
    undeclared = [s.result for s in steps if s.name == "par.tool"]
    assert undeclared == [{"tool": "plain", "retry": "once more"}]
    if fail is None:
        assert log == ["model 1", "fast", "slow", "model 2"]
    else:
        # `slow` was in flight when `fast` failed: it finished, and was undone.
        assert log == ["model 1", "slow", "undo 0"]


async def test_a_cancel_while_waiting_for_approval_compensates(db_url: str, tmp_path: Path) -> None:
    manager, agency, plan_trip, requests = setup(db_url, tmp_path)
    async with manager:
        handle = await manager.workflow(plan_trip, "Baku").execute(idempotency_key="t6")
        await status_is(handle, sw.WorkflowStatus.WAITING)
        assert await handle.cancel("trip called off")
        with pytest.raises(sw.WorkflowCancelled):
            await handle.result(timeout=20)
    assert agency.lines()[-2:] == ["cancel hotel Baku", "cancel flight Baku"]
    assert requests == [0, 1, 2]


async def test_streaming_is_refused_with_what_to_do(sqlite_url: str) -> None:
    manager = sw.Manager(sqlite_url, poll_interval=0.05)
    agent: Agent[None, str] = Agent(FunctionModel(lambda messages, info: ModelResponse([])))
    durable = DurableAgent(manager, agent, name="streamed")

    async def ignore(ctx: Any, events: Any) -> None:
        async for _ in events:
            pass

    @manager.register_workflow(name="streamed.flow")
    async def flow() -> str:
        return (await durable.run("go", event_stream_handler=ignore)).output

    async with manager:
        handle = await manager.workflow(flow).execute(idempotency_key="s1")
        await status_is(handle, sw.WorkflowStatus.SUSPENDED)
        error = (await handle.describe()).error
    assert error is not None and "records each model response whole" in str(error)


async def test_the_console_shows_what_waits_for_approval(db_url: str, tmp_path: Path) -> None:
    from starlette.testclient import TestClient

    from sagaway.console import ConsoleConfig, create_app

    manager, _, plan_trip, _ = setup(db_url, tmp_path)
    async with manager:
        handle = await manager.workflow(plan_trip, "Lima").execute(idempotency_key="t7")
        await status_is(handle, sw.WorkflowStatus.WAITING)
        app = create_app(ConsoleConfig(url=db_url))
        with TestClient(app, base_url="http://127.0.0.1:8080") as client:
            page = (await asyncio.to_thread(client.get, "/workflows/t7")).text
        await handle.cancel()
    text = html.unescape(re.sub(r"<[^>]+>", " ", page))
    assert "waiting for signal:approval" in text
    assert "travel.approval_request" in text and '"tool": "book_car"' in text


async def test_an_agent_that_gives_up_fails_and_compensates(db_url: str) -> None:
    manager = sw.Manager(db_url, poll_interval=0.05)
    log: list[str] = []

    def always_a_tool(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[ToolCallPart("hold", {"n": len(messages)})])

    agent: Agent[None, str] = Agent(FunctionModel(always_a_tool))
    durable = DurableAgent(manager, agent, name="looping")

    @manager.register_activity(name="looping.free")
    async def free(n: int) -> None:
        log.append(f"free {n}")

    @durable.tool(compensate=free)
    async def hold(n: int) -> int:
        log.append(f"hold {n}")
        return n

    @manager.register_workflow(name="looping.flow")
    async def flow() -> str:
        # The model never stops calling tools: the third request is over the limit, which
        # Pydantic AI raises (UsageLimitExceeded) before sending it.
        result = await durable.run("go", usage_limits=UsageLimits(request_limit=2))
        return result.output

    async with manager:
        handle = await manager.workflow(flow).execute(idempotency_key="l1")
        with pytest.raises(AgentFailed, match="request_limit"):
            await handle.result(timeout=20)
    assert log == ["hold 1", "hold 3", "free 3", "free 1"]


async def test_on_text_streams_the_model_text_live_and_a_replay_streams_nothing(
    db_url: str,
) -> None:
    manager = sw.Manager(db_url, poll_interval=0.05)
    pieces: list[TextDelta] = []

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str]:
        for word in ["Your ", "trip ", "is ", "booked."]:
            yield word

    async def show(delta: TextDelta) -> None:
        pieces.append(delta)

    agent: Agent[None, str] = Agent(FunctionModel(stream_function=stream))
    durable = DurableAgent(manager, agent, name="live", on_text=show)
    failed: list[int] = []

    @manager.register_activity(name="live.after")
    async def after() -> None:
        if not failed:  # once: the run is suspended, then replayed from its record
            failed.append(1)
            raise RuntimeError("not yet")

    @manager.register_workflow(name="live.flow")
    async def flow() -> str:
        result = await durable.run("go")
        await after()
        return result.output

    async with manager:
        handle = await manager.workflow(flow).execute(idempotency_key="v1")
        await status_is(handle, sw.WorkflowStatus.SUSPENDED)
        await manager.retry("v1")
        assert await handle.result(timeout=20) == "Your trip is booked."
        description = await handle.describe()
    assert "".join(p.text for p in pieces) == "Your trip is booked."
    assert {(p.workflow_key, p.attempt) for p in pieces} == {("v1", 1)}
    step = next(s for s in description.steps if s.name == "live.model_request")
    assert {p.call_id for p in pieces} == {step.call_id}
    assert [r.text for r in model_responses(description, "live")] == ["Your trip is booked."]


async def test_the_workflows_own_saga_undoes_the_agents_tools_when_a_later_step_fails(
    db_url: str,
) -> None:
    manager = sw.Manager(db_url, poll_interval=0.05)
    log: list[str] = []

    def two_tools(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        asked = sum(isinstance(m, ModelRequest) for m in messages)
        if asked <= 2:
            return ModelResponse(parts=[ToolCallPart("hold", {"n": asked})])
        return ModelResponse(parts=[TextPart("held")])

    agent: Agent[None, str] = Agent(FunctionModel(two_tools))
    durable = DurableAgent(manager, agent, name="shared")

    @manager.register_activity(name="shared.free")
    async def free(n: int) -> None:
        log.append(f"free {n}")

    @durable.tool(compensate=free)
    async def hold(n: int) -> int:
        log.append(f"hold {n}")
        return n

    @manager.register_activity(name="shared.pay")
    async def pay() -> None:
        log.append("pay")
        raise Full("card declined")

    @manager.register_workflow(name="shared.flow")
    async def flow() -> str:
        async with sw.Saga() as saga:
            result = await durable.run("go", saga=saga)  # succeeds: its tools stay held
            await pay()  # fails after the agent's run: the saga undoes the agent's tools
            return result.output

    async with manager:
        handle = await manager.workflow(flow).execute(idempotency_key="w1")
        with pytest.raises(Full):
            await handle.result(timeout=20)
    assert log == ["hold 1", "hold 2", "pay", "free 2", "free 1"]


async def test_text_stream_holds_each_responses_text_once_for_any_reader(db_url: str) -> None:
    """``text_stream=``: each model response's text is a durable stream item, written once
    (a replay after the run was suspended writes nothing again) and read by a client."""
    manager = sw.Manager(db_url, poll_interval=0.05)
    turns = iter(
        [
            ModelResponse(parts=[TextPart("Looking for flights."), ToolCallPart("look", {})]),
            ModelResponse(parts=[TextPart("Found one for 120 EUR.")]),
        ]
    )

    def script(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return next(turns)

    agent: Agent[None, str] = Agent(FunctionModel(script))
    durable = DurableAgent(manager, agent, name="texts", text_stream="answer")
    failed: list[int] = []

    @durable.tool
    async def look() -> str:
        return "flight 1"

    @manager.register_activity(name="texts.after")
    async def after() -> None:
        if not failed:  # once: the run is suspended, then replayed from its record
            failed.append(1)
            raise RuntimeError("not yet")

    @manager.register_workflow(name="texts.flow")
    async def flow() -> str:
        result = await durable.run("find me a flight")
        await after()
        return result.output

    async with manager:
        handle = await manager.workflow(flow).execute(idempotency_key="t1")
        await status_is(handle, sw.WorkflowStatus.SUSPENDED)
        await manager.retry("t1")
        assert await handle.result(timeout=20) == "Found one for 120 EUR."
        items = [item async for item in handle.read_stream("answer", follow=False)]
    assert [item.value for item in items] == ["Looking for flights.", "Found one for 120 EUR."]
    assert [item.offset for item in items] == [0, 1]


def test_a_bad_text_stream_name_is_refused_at_once(sqlite_url: str) -> None:
    agent: Agent[None, str] = Agent(FunctionModel(lambda m, i: ModelResponse(parts=[])))
    with pytest.raises(ValueError, match="stream name"):
        DurableAgent(sw.Manager(sqlite_url), agent, name="bad", text_stream="")
