"""A cancel request accepted while a workflow is live is never lost (SQLite, PostgreSQL, and
both through the Engine Server).

It used to be dropped when it arrived during the last activity: no durable call followed, so
nothing delivered it, and the workflow COMPLETED with nothing compensated. Now the end of a
``Saga`` block and the workflow's own end deliver it, and the statement that ends a workflow
COMPLETED refuses while a request it has not seen is recorded (``CancelPending``).
"""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

import pytest
from click.testing import CliRunner

import sagaway as sw
from sagaway.cli.main import cli
from sagaway.states import WorkflowStatus
from sagaway.store import Store
from sagaway.store.base import CancelPending
from sagaway.testing import FakeClock
from sagaway.testing.internals import store_of
from tests.store_helpers import T0, run_of, running, step


def make_manager(db_url: str, **options: Any) -> sw.Manager:
    options.setdefault("poll_interval", 0.05)
    return sw.Manager(db_url, **options)


# ------------------------------------------------------------------ the store's contract


async def test_a_completed_end_is_refused_over_a_cancel_request_it_has_not_seen(
    store: Store,
) -> None:
    held = await running(store, "k1")
    record = await run_of(store, "k1")
    assert await store.request_cancel(record.run_id, reason="customer withdrew", now=T0 + 1)

    with pytest.raises(CancelPending) as info:
        await store.finish_workflow(
            record.run_id,
            token=held.token,
            status=WorkflowStatus.COMPLETED,
            result='"r"',
            error=None,
            now=T0 + 2,
            final_step=step(record.run_id, "1", T0 + 1, ended_at=T0 + 2),
            has_parent=False,
        )
    assert info.value.reason == "customer withdrew"
    assert info.value.run_id == record.run_id
    still = await run_of(store, "k1")
    assert still.status is WorkflowStatus.RUNNING  # not ended, still owned
    assert await store.load_steps(record.run_id) == []  # the final step went with the refusal

    # The owner delivers it and ends CANCELLED; a later request is refused: it has ended.
    await store.finish_workflow(
        record.run_id,
        token=held.token,
        status=WorkflowStatus.CANCELLED,
        result=None,
        error='{"type": "x"}',
        now=T0 + 3,
        has_parent=False,
    )
    assert (await run_of(store, "k1")).status is WorkflowStatus.CANCELLED
    assert not await store.request_cancel(record.run_id, reason="too late", now=T0 + 4)


@pytest.mark.parametrize("has_parent", [False, True])
async def test_a_run_that_saw_the_request_may_still_complete(
    store: Store, has_parent: bool
) -> None:
    held = await running(store, "k1")
    record = await run_of(store, "k1")
    assert await store.request_cancel(record.run_id, reason="stop", now=T0 + 1)
    with pytest.raises(CancelPending):
        await store.finish_workflow(
            record.run_id,
            token=held.token,
            status=WorkflowStatus.COMPLETED,
            result='"r"',
            error=None,
            now=T0 + 2,
            has_parent=has_parent,
        )
    # Code that caught the delivered cancellation and returned: it ends as it returns.
    await store.finish_workflow(
        record.run_id,
        token=held.token,
        status=WorkflowStatus.COMPLETED,
        result='"r"',
        error=None,
        now=T0 + 2,
        has_parent=has_parent,
        cancel_seen=True,
    )
    assert (await run_of(store, "k1")).status is WorkflowStatus.COMPLETED


async def test_a_refused_end_of_a_run_not_owned_is_still_a_lost_lease(store: Store) -> None:
    await running(store, "k1")
    record = await run_of(store, "k1")
    assert await store.request_cancel(record.run_id, reason="stop", now=T0 + 1)
    with pytest.raises(sw.LeaseLost):
        await store.finish_workflow(
            record.run_id,
            token="not-the-owner",
            status=WorkflowStatus.COMPLETED,
            result='"r"',
            error=None,
            now=T0 + 2,
            has_parent=False,
        )


# ------------------------------------------------------------------ workflows


def order_activities(
    manager: sw.Manager, log: list[str], gate: asyncio.Event, started: asyncio.Event
) -> tuple[Any, Any, Any, Any]:
    """reserve, release, charge (``started``, then held at ``gate``) and refund, registered;
    each logs what it did."""

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
        started.set()
        await gate.wait()
        return f"pay-{order}"

    @manager.register_activity
    async def refund(payment: str) -> None:
        log.append(f"refund {payment}")

    return reserve, release, charge, refund


def define_order(
    manager: sw.Manager, log: list[str], gate: asyncio.Event, started: asyncio.Event
) -> Any:
    """reserve, then charge (``started``, then held at ``gate``) as the saga's last step."""
    reserve, release, charge, refund = order_activities(manager, log, gate, started)

    @manager.register_workflow(name="order")
    async def order(order_id: str) -> str:
        async with sw.Saga() as saga:
            reservation = await reserve(order_id)
            saga.add_compensation(release, reservation)
            payment = await charge(order_id)
            saga.add_compensation(refund, payment)
            return payment

    return order


async def test_a_cancel_during_the_last_activity_of_a_saga_compensates(db_url: str) -> None:
    manager = make_manager(db_url)
    log: list[str] = []
    gate, started = asyncio.Event(), asyncio.Event()
    order = define_order(manager, log, gate, started)

    async with manager:
        handle = await manager.workflow(order, "o1").execute(idempotency_key="o1")
        await asyncio.wait_for(started.wait(), 10)
        assert await handle.cancel("customer withdrew")
        gate.set()  # the last activity finishes: no durable call follows it
        with pytest.raises(sw.WorkflowCancelled, match="customer withdrew"):
            await handle.result(timeout=10)
        description = await handle.describe()

    assert log == ["reserve", "charge", "refund pay-o1", "release res-o1"]
    delivered = [s for s in description.steps if s.kind is sw.StepKind.CANCEL]
    assert [(s.name, s.status) for s in delivered] == [("saga end", sw.StepStatus.FAILED)]


async def test_a_cancel_from_another_process_during_the_last_activity_is_not_lost(
    db_url: str,
) -> None:
    """The request comes from a client the running process hears nothing from (on SQLite it
    would learn of it at its next heartbeat): the saga's end reads it from the database."""
    manager = make_manager(db_url, lease_timeout=600)  # no heartbeat within the test
    client = make_manager(db_url)
    log: list[str] = []
    gate, started = asyncio.Event(), asyncio.Event()
    order = define_order(manager, log, gate, started)

    async with manager, client.connect():
        handle = await manager.workflow(order, "o2").execute(idempotency_key="o2")
        await asyncio.wait_for(started.wait(), 10)
        assert await client.cancel("o2", "from the console")
        gate.set()
        with pytest.raises(sw.WorkflowCancelled, match="from the console"):
            await handle.result(timeout=10)

    assert log == ["reserve", "charge", "refund pay-o2", "release res-o2"]


async def test_a_cancel_after_the_saga_ended_is_delivered_at_the_workflow_end(
    db_url: str,
) -> None:
    """Accepted while the workflow's last activity (after its saga block) runs: the end is
    refused by the database and the workflow ends CANCELLED; the closed block is not undone."""
    manager = make_manager(db_url, lease_timeout=600)
    client = make_manager(db_url)
    log: list[str] = []
    gate, started = asyncio.Event(), asyncio.Event()

    @manager.register_activity
    async def reserve(order: str) -> str:
        log.append("reserve")
        return f"res-{order}"

    @manager.register_activity
    async def release(reservation: str) -> None:
        log.append(f"release {reservation}")

    @manager.register_activity
    async def notify(order: str) -> None:
        log.append("notify")
        started.set()
        await gate.wait()

    @manager.register_workflow(name="order_then_notify")
    async def order_then_notify(order_id: str) -> str:
        async with sw.Saga() as saga:
            reservation = await reserve(order_id)
            saga.add_compensation(release, reservation)
        await notify(order_id)
        return reservation

    async with manager, client.connect():
        handle = await manager.workflow(order_then_notify, "o3").execute(idempotency_key="o3")
        await asyncio.wait_for(started.wait(), 10)
        assert await client.cancel("o3", "late")
        gate.set()
        with pytest.raises(sw.WorkflowCancelled, match="late"):
            await handle.result(timeout=10)
        description = await handle.describe()
        assert not await client.cancel("o3", "after the end")

    assert description.status is sw.WorkflowStatus.CANCELLED
    delivered = [s for s in description.steps if s.kind is sw.StepKind.CANCEL]
    assert [s.name for s in delivered] == ["workflow end"]
    assert log == ["reserve", "notify"]


# ------------------------------------------------------------------ deadlines


async def until_sleeping(clock: FakeClock, seconds: float) -> None:
    """Wait until a task sleeps ``seconds`` on ``clock`` (the attempt's deadline timer)."""

    async def poll() -> None:
        while True:
            if any(s == pytest.approx(seconds) for _, s in clock.pending()):
                return
            await asyncio.sleep(0.005)

    await asyncio.wait_for(poll(), 10)


async def ended_on_fake_time(handle: sw.WorkflowHandle[Any], clock: FakeClock) -> None:
    async def tick() -> None:
        while not (await handle.status()).ended:
            await clock.advance(0.05)
            await asyncio.sleep(0.01)

    await asyncio.wait_for(tick(), 10)


async def test_an_async_activity_that_never_returns_is_cancelled_past_the_deadline_and_grace(
    db_url: str,
) -> None:
    clock = FakeClock()
    manager = make_manager(db_url, clock=clock, deadline_grace=2.0)
    undone: list[str] = []
    started, cancelled_inside = asyncio.Event(), asyncio.Event()

    @manager.register_activity
    async def hold() -> str:
        return "h"

    @manager.register_activity
    async def free(token: str) -> None:
        undone.append(token)

    @manager.register_activity
    async def never() -> None:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled_inside.set()
            raise

    @manager.register_workflow
    async def flow() -> str:
        async with sw.Saga() as saga:
            saga.add_compensation(free, await hold())
            await never()
            return "done"

    async with manager:
        handle = await manager.workflow(flow).execute(idempotency_key="d1", deadline=1.5)
        await asyncio.wait_for(started.wait(), 10)
        await until_sleeping(clock, 3.5)  # the deadline (1.5 s) and the grace (2 s)
        await clock.advance(3.0)  # past the deadline, within the grace: it runs on
        assert not cancelled_inside.is_set()
        assert (await handle.status()) is sw.WorkflowStatus.RUNNING
        await clock.advance(0.6)
        await asyncio.wait_for(cancelled_inside.wait(), 10)  # cancelled inside its task
        await ended_on_fake_time(handle, clock)
        with pytest.raises(sw.WorkflowCancelled, match="deadline passed"):
            await handle.result(timeout=10)
        description = await handle.describe()

    assert undone == ["h"]  # what completed is compensated
    [cut] = [s for s in description.steps if s.name.endswith("never")]
    assert cut.status is sw.StepStatus.FAILED
    assert cut.error is not None and cut.error["type"] == "sagaway.Cancelled"
    assert "still running 2s after the deadline" in cut.error["message"]


async def test_a_sync_activity_past_the_deadline_is_abandoned_and_its_thread_runs_on(
    db_url: str,
) -> None:
    clock = FakeClock()
    manager = make_manager(db_url, clock=clock, deadline_grace=1.0)
    undone: list[str] = []
    started, release = threading.Event(), threading.Event()
    finished: list[str] = []

    @manager.register_activity
    async def hold() -> str:
        return "h"

    @manager.register_activity
    async def free(token: str) -> None:
        undone.append(token)

    @manager.register_activity
    def blocking() -> str:
        started.set()
        release.wait(30)
        finished.append("thread")
        return "late"

    @manager.register_workflow
    async def flow() -> str:
        async with sw.Saga() as saga:
            saga.add_compensation(free, await hold())
            return await blocking()

    try:
        async with manager:
            handle = await manager.workflow(flow).execute(idempotency_key="d2", deadline=1.0)
            await asyncio.to_thread(started.wait, 10)
            await until_sleeping(clock, 2.0)
            await clock.advance(2.1)
            await ended_on_fake_time(handle, clock)
            with pytest.raises(sw.WorkflowCancelled):
                await handle.result(timeout=10)
            assert finished == []  # the thread still runs: it cannot be stopped
            assert undone == ["h"]
    finally:
        release.set()


# ------------------------------------------------------------------ every request, shown


async def test_every_cancel_request_is_shown_with_its_fate(db_url: str) -> None:
    """describe(), `sagaway show` (text and --json) and the console's workflow page list each
    request: reason, when, where it was delivered, or why not."""
    manager = make_manager(db_url)
    log: list[str] = []
    gate, started = asyncio.Event(), asyncio.Event()
    order = define_order(manager, log, gate, started)

    async with manager:
        handle = await manager.workflow(order, "o4").execute(idempotency_key="o4")
        await asyncio.wait_for(started.wait(), 10)
        assert await handle.cancel("customer withdrew")
        assert await handle.cancel("asked twice")
        gate.set()
        with pytest.raises(sw.WorkflowCancelled):
            await handle.result(timeout=10)
        assert not await handle.cancel("too late")
        description = await handle.describe()

    first, second, third = description.cancel_requests
    assert (first.reason, first.state, first.delivered_where) == (
        "customer withdrew",
        "delivered",
        "saga end",
    )
    assert first.delivered_call is not None and first.delivered_at is not None
    assert first.requested_at <= first.delivered_at
    assert (second.reason, second.state, second.delivered_call) == (
        "asked twice",
        "joined",
        first.delivered_call,
    )
    assert (third.reason, third.state, third.accepted) == ("too late", "refused", False)
    assert third.why == "the workflow had already ended"

    result = await asyncio.to_thread(CliRunner().invoke, cli, ["show", "o4", "--db", db_url])
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "cancel requests" in text
    assert (
        f"'customer withdrew' delivered: delivered at step {first.delivered_call} (saga end)"
        in (text)
    )
    assert "'too late' refused: the workflow had already ended" in text

    result = await asyncio.to_thread(
        CliRunner().invoke, cli, ["show", "o4", "--json", "--db", db_url]
    )
    assert result.exit_code == 0, result.output
    shown = json.loads(result.output)["cancel_requests"]
    assert [(r["reason"], r["state"], r["accepted"]) for r in shown] == [
        ("customer withdrew", "delivered", True),
        ("asked twice", "joined", True),
        ("too late", "refused", False),
    ]
    assert shown[0]["delivered_where"] == "saga end"
    assert shown[0]["requested_at_iso"] is not None

    pytest.importorskip("starlette", reason="the [ui] extra is part of the dev install")
    from starlette.testclient import TestClient

    from sagaway.console import ConsoleConfig, create_app

    def page() -> str:
        app = create_app(ConsoleConfig(url=db_url))
        with TestClient(app, base_url="http://127.0.0.1:8080") as client:
            return str(client.get("/workflows/o4").text)

    html = await asyncio.to_thread(page)
    assert "Cancel requests" in html
    assert "customer withdrew" in html and "too late" in html
    assert "the workflow had already ended" in html


async def test_the_requests_of_a_purged_workflow_go_with_it(store: Store) -> None:
    held = await running(store, "k1")
    record = await run_of(store, "k1")
    assert await store.request_cancel(record.run_id, reason="stop", now=T0 + 1)
    await store.finish_workflow(
        record.run_id,
        token=held.token,
        status=WorkflowStatus.CANCELLED,
        result=None,
        error='{"type": "x"}',
        now=T0 + 2,
        has_parent=False,
    )
    assert not await store.request_cancel(record.run_id, reason="late", now=T0 + 3)
    logged = await store.list_cancel_requests(record.run_id)
    assert [(r.reason, r.accepted) for r in logged] == [("stop", True), ("late", False)]

    assert await store.purge_ended(before=T0 + 10, statuses=None, limit=10) == [record.run_id]
    assert await store.list_cancel_requests(record.run_id) == []


async def test_ends_written_together_are_refused_one_by_one(store: Store) -> None:
    """Top-level ends that share one statement (PostgreSQL's group commit): only the one
    with a pending request is refused."""
    held = {key: await running(store, key) for key in ("a", "b", "c")}
    runs = {key: (await run_of(store, key)).run_id for key in held}
    assert await store.request_cancel(runs["b"], reason="stop b", now=T0 + 1)

    async def end(key: str) -> None:
        await store.finish_workflow(
            runs[key],
            token=held[key].token,
            status=WorkflowStatus.COMPLETED,
            result='"r"',
            error=None,
            now=T0 + 2,
            final_step=step(runs[key], "1", T0 + 1, ended_at=T0 + 2),
            has_parent=False,
        )

    outcomes = await asyncio.gather(*(end(key) for key in held), return_exceptions=True)
    assert outcomes[0] is None and outcomes[2] is None
    assert isinstance(outcomes[1], CancelPending) and outcomes[1].reason == "stop b"
    statuses = {key: (await run_of(store, key)).status for key in held}
    assert statuses == {
        "a": WorkflowStatus.COMPLETED,
        "b": WorkflowStatus.RUNNING,
        "c": WorkflowStatus.COMPLETED,
    }


async def test_a_hand_written_saga_is_undone_when_the_end_delivers_the_cancel(
    db_url: str,
) -> None:
    manager = make_manager(db_url, lease_timeout=600)
    client = make_manager(db_url)
    log: list[str] = []
    gate, started = asyncio.Event(), asyncio.Event()

    reserve, release, charge, refund = order_activities(manager, log, gate, started)

    @manager.register_workflow(name="explicit_order")
    async def explicit_order(order_id: str) -> str:
        saga = sw.Saga()
        try:
            saga.add_compensation(release, await reserve(order_id))
            payment = await charge(order_id)
            saga.add_compensation(refund, payment)
        except (sw.CompletableError, sw.Cancelled):
            await saga.execute()
            raise
        return payment

    async with manager, client.connect():
        handle = await manager.workflow(explicit_order, "o5").execute(idempotency_key="o5")
        await asyncio.wait_for(started.wait(), 10)
        assert await client.cancel("o5", "withdrawn")
        gate.set()
        with pytest.raises(sw.WorkflowCancelled, match="withdrawn"):
            await handle.result(timeout=10)
        description = await handle.describe()

    assert log == ["reserve", "charge", "refund pay-o5", "release res-o5"]
    assert [s.name for s in description.steps if s.kind is sw.StepKind.CANCEL] == ["workflow end"]


async def test_a_cancel_delivered_at_the_workflow_end_survives_a_crash_after_its_record(
    db_url: str,
) -> None:
    """The process that delivered a cancellation at the workflow's end (a hand-written saga's
    last activity was running when the request came) dies right after that ``cancel`` step is
    written, before any compensation. The process that takes the run over replays it: the
    recorded step counts the request as seen, so nothing is pending any more, yet the run
    must end CANCELLED after its compensations (it used to end COMPLETED, nothing undone:
    found by the generative test, a child whose parent was cancelled)."""
    clock = FakeClock()
    log: list[str] = []
    gate, started, frozen = asyncio.Event(), asyncio.Event(), asyncio.Event()
    gone = asyncio.Event()  # set once the test is done: the frozen calls fail then

    def build(name: str, poll_interval: float) -> tuple[sw.Manager, Any]:
        manager = make_manager(db_url, clock=clock, lease_timeout=60.0, poll_interval=poll_interval)

        @manager.register_activity
        async def reserve(order: str) -> str:
            log.append(f"{name}: reserve")
            return f"res-{order}"

        @manager.register_activity
        async def release(reservation: str) -> None:
            log.append(f"{name}: release {reservation}")

        @manager.register_activity
        async def charge(order: str) -> str:
            log.append(f"{name}: charge")
            started.set()
            await gate.wait()
            return f"pay-{order}"

        @manager.register_workflow(name="explicit_order")
        async def explicit_order(order_id: str) -> str:
            saga = sw.Saga()
            try:
                saga.add_compensation(release, await reserve(order_id))
                payment = await charge(order_id)
            except (sw.CompletableError, sw.Cancelled):
                await saga.execute()
                raise
            return payment

        return manager, explicit_order

    first, explicit_order = build("first", 10_000.0)
    second, _ = build("second", 1.0)  # takes runs over when their leases expire

    async def record_then_freeze(step: Any, **kwargs: Any) -> None:
        await record_step(step, **kwargs)
        if step.kind is sw.StepKind.CANCEL:
            frozen.set()
            await gone.wait()  # the process is gone: it never hears back
            raise ConnectionError("the process died")

    async def no_heartbeat(tokens: Any, *, expires_at: float) -> set[str]:
        if frozen.is_set():
            await gone.wait()
            raise ConnectionError("the process died")
        return await renew(tokens, expires_at=expires_at)

    # Both open at the same fake time (on PostgreSQL each reads the server's clock offset).
    async with first, second:
        store = store_of(first)
        record_step, renew = store.record_step, store.renew_leases
        store.record_step = record_then_freeze  # type: ignore[method-assign]
        store.renew_leases = no_heartbeat  # type: ignore[method-assign]
        handle = await first.workflow(explicit_order, "o6").execute(idempotency_key="o6")
        await asyncio.wait_for(started.wait(), 10)
        assert await handle.cancel("withdrawn")
        gate.set()
        await asyncio.wait_for(frozen.wait(), 10)
        assert log == ["first: reserve", "first: charge"]  # nothing undone yet
        replayed = second.get_workflow("o6")
        await clock.advance(61.0)  # its lease expires: the second process replays it
        await ended_on_fake_time(replayed, clock)
        with pytest.raises(sw.WorkflowCancelled, match="withdrawn"):
            await asyncio.wait_for(replayed.result(), 10)
        description = await replayed.describe()
        gone.set()

    assert log == ["first: reserve", "first: charge", "second: release res-o6"]
    assert [s.name for s in description.steps if s.kind is sw.StepKind.CANCEL] == ["workflow end"]
