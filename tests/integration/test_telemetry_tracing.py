"""OpenTelemetry spans: one trace per workflow, with the right parents (SQLite, PostgreSQL,
through a server). The crash case (kill -9, recovery in another process) is in
``tests/acceptance/test_tracing_crash.py``."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

import sagaway as sw
from sagaway.telemetry import tracing


class Declined(sw.CompletableError):
    """The card was declined."""


@pytest.fixture
def spans() -> Iterator[tuple[InMemorySpanExporter, TracerProvider]]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.enable_tracing(provider)
    try:
        yield exporter, provider
    finally:
        tracing.disable_tracing()
        provider.shutdown()


def by_trace(finished: tuple[ReadableSpan, ...]) -> dict[int, list[ReadableSpan]]:
    out: dict[int, list[ReadableSpan]] = {}
    for span in finished:
        assert span.context is not None
        out.setdefault(span.context.trace_id, []).append(span)
    return out


def key_of(span: ReadableSpan) -> str:
    assert span.attributes is not None
    return str(span.attributes["sagaway.workflow.key"])


def parent_id(span: ReadableSpan) -> int | None:
    return None if span.parent is None else span.parent.span_id


def span_id(span: ReadableSpan) -> int:
    assert span.context is not None
    return span.context.span_id


async def test_each_saga_is_one_trace_with_runs_under_its_start_and_attempts_under_runs(
    db_url: str, spans: tuple[InMemorySpanExporter, TracerProvider]
) -> None:
    exporter, _ = spans
    manager = sw.Manager(db_url, poll_interval=0.05)

    @manager.register_activity(name="reserve")
    async def reserve(i: int) -> str:
        return f"r{i}"

    @manager.register_activity(name="release")
    async def release(reservation: str) -> None:
        return None

    @manager.register_activity(name="charge")
    async def charge(i: int) -> str:
        if i % 4 == 1:
            raise Declined("declined")
        return "c"

    @manager.register_workflow(name="order")
    async def order(i: int) -> str:
        async with sw.Saga() as saga:
            saga.add_compensation(release, await reserve(i))
            return await charge(i)

    async with manager:
        for i in range(12):
            with pytest.raises(Declined) if i % 4 == 1 else _nothing():
                await manager.workflow(order, i).execute_get(idempotency_key=f"o{i}")

    traces = by_trace(exporter.get_finished_spans())
    assert len(traces) == 12  # one trace per workflow
    for members in traces.values():
        keys = {key_of(s) for s in members}
        assert len(keys) == 1
        i = int(keys.pop()[1:])
        names = sorted(s.name for s in members)
        expected = ["RunActivity:" + n for n in ("charge", "reserve")]
        if i % 4 == 1:
            expected.append("RunCompensation:release")
        expected += ["RunWorkflow:order", "StartWorkflow:order"]
        assert names == sorted(expected)
        [start] = [s for s in members if s.name.startswith("StartWorkflow")]
        [run] = [s for s in members if s.name.startswith("RunWorkflow")]
        assert start.parent is None  # no span was current where it started: a new trace
        assert parent_id(run) == span_id(start)
        for attempt in members:
            if attempt.name.startswith(("RunActivity", "RunCompensation")):
                assert parent_id(attempt) == span_id(run)
                assert attempt.attributes is not None
                assert attempt.attributes["sagaway.attempt"] == 1
                assert attempt.attributes["sagaway.workflow.key"] == f"o{i}"
        charge_span = next(s for s in members if "charge" in s.name)
        failed = i % 4 == 1
        assert (charge_span.status.status_code is StatusCode.ERROR) == failed
        assert run.attributes["sagaway.outcome"] == ("failed" if failed else "completed")  # type: ignore[index]


async def test_a_wait_a_child_and_the_callers_span_all_join_one_trace(
    db_url: str, spans: tuple[InMemorySpanExporter, TracerProvider]
) -> None:
    exporter, provider = spans
    manager = sw.Manager(db_url, poll_interval=0.05)
    approve = manager.signal("approve")
    waiting = asyncio.Event()

    @manager.register_activity(name="step")
    async def step(name: str) -> str:
        return name

    @manager.register_workflow(name="child")
    async def child(n: int) -> int:
        await step("in child")
        await approve.receive(bool, timeout=60)  # so the parent surely unloads to wait for it
        return n + 1

    @manager.register_workflow(name="parent")
    async def parent() -> int:
        await step("before")
        waiting.set()
        await approve.receive(bool, timeout=60)
        return await manager.workflow(child, 1).execute_get(idempotency_key="p1-child")

    tracer = provider.get_tracer("the application")
    async with manager:
        with tracer.start_as_current_span("POST /orders") as request:
            handle = await manager.workflow(parent).execute(idempotency_key="p1")
        await asyncio.wait_for(waiting.wait(), 20)
        await _until_waiting(handle)
        await approve.send("p1", True)
        await _until_waiting(handle, "child:p1-child")
        await approve.send("p1-child", True)
        assert await handle.result(timeout=20) == 2

    finished = exporter.get_finished_spans()
    traces = by_trace(finished)
    assert list(traces) == [request.get_span_context().trace_id]  # all in the caller's trace
    members = traces[request.get_span_context().trace_id]
    start = next(s for s in members if s.name == "StartWorkflow:parent")
    assert parent_id(start) == request.get_span_context().span_id
    runs = [s for s in members if s.name == "RunWorkflow:parent"]
    # Before the signal; after it until the child's end (a replay, then the child's start);
    # after the child's end.
    assert len(runs) == 3
    assert {parent_id(r) for r in runs} == {span_id(start)}
    outcomes = [r.attributes["sagaway.outcome"] for r in runs]  # type: ignore[index]
    assert outcomes == ["waiting", "waiting", "completed"]
    child_start = next(s for s in members if s.name == "StartWorkflow:child")
    assert parent_id(child_start) == span_id(runs[1])  # started by the second run
    child_run = next(s for s in members if s.name == "RunWorkflow:child")
    assert parent_id(child_run) == span_id(child_start)
    in_child = next(s for s in members if s.name == "RunActivity:step" and key_of(s) != "p1")
    assert parent_id(in_child) == span_id(child_run)


async def _until_waiting(handle: sw.WorkflowHandle[Any], waiting_for: str | None = None) -> None:
    async def poll() -> None:
        while True:
            description = await handle.describe()
            if description.status is sw.WorkflowStatus.WAITING and (
                waiting_for is None or description.waiting_for == waiting_for
            ):
                return
            await asyncio.sleep(0.01)

    await asyncio.wait_for(poll(), 20)


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


async def test_a_workflow_sampled_out_makes_no_run_or_attempt_spans_but_keeps_its_context(
    db_url: str,
) -> None:
    from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, ParentBased

    exporter = InMemorySpanExporter()
    provider = TracerProvider(sampler=ParentBased(ALWAYS_OFF))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.enable_tracing(provider)
    seen: list[Any] = []
    try:
        manager = sw.Manager(db_url, poll_interval=0.05)

        @manager.register_activity(name="look")
        async def look() -> str:
            from opentelemetry import trace

            seen.append(trace.get_current_span().get_span_context())
            return "ok"

        @manager.register_workflow(name="quiet")
        async def quiet() -> str:
            return await look()

        async with manager:
            await manager.workflow(quiet).execute_get(idempotency_key="q1")
            stored = (await manager.get_workflow("q1").describe()).run_id
    finally:
        tracing.disable_tracing()
        provider.shutdown()
    assert stored and exporter.get_finished_spans() == ()
    [context] = seen
    assert context.is_valid and not context.trace_flags.sampled  # the workflow's own trace


async def test_a_shutdown_while_a_run_writes_its_end_lets_it_commit_and_report_completed(
    db_url: str, spans: tuple[InMemorySpanExporter, TracerProvider]
) -> None:
    # The caller may already hold the result when the end's write returns; cancelling the run
    # then saves nothing and would report a completed workflow as stopped.
    exporter, _ = spans
    manager = sw.Manager(db_url, poll_interval=0.05)

    @manager.register_workflow(name="quick")
    async def quick() -> int:
        return 7

    writing = asyncio.Event()
    async with manager:
        store = manager._ref.engine.store  # type: ignore[union-attr]
        finish = store.finish_workflow

        async def slow_finish(*args: Any, **kwargs: Any) -> Any:
            writing.set()
            await asyncio.sleep(0.3)
            return await finish(*args, **kwargs)

        store.finish_workflow = slow_finish  # type: ignore[method-assign]
        await manager.workflow(quick).execute(idempotency_key="q1")
        await asyncio.wait_for(writing.wait(), 20)
    run = next(s for s in exporter.get_finished_spans() if s.name == "RunWorkflow:quick")
    assert run.attributes is not None
    assert run.attributes["sagaway.outcome"] == "completed"
    async with manager.connect() as client:
        assert await client.get_workflow("q1").status() is sw.WorkflowStatus.COMPLETED
