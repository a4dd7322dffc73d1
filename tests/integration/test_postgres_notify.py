"""LISTEN/NOTIFY hands work and results between processes without waiting for a poll."""

from __future__ import annotations

import asyncio
import collections
import uuid
from typing import Any

import psycopg
import pytest

import sagaway as sw
from sagaway.clock import SystemClock
from sagaway.store.notices import Ended, Notice, encode
from sagaway.testing import FakeClock
from sagaway.testing.internals import engine_of, store_of
from tests.conftest import POSTGRES_URL

SLOW_POLL = 3600.0  # polling alone would take an hour: only notifications can be this fast


def _define(manager: sw.Manager, entered: asyncio.Event | None = None) -> None:
    @manager.register_activity(name="double")
    async def double(x: int) -> int:
        if entered is not None:
            entered.set()
            await asyncio.Event().wait()
        return 2 * x

    @manager.register_workflow(name="flow")
    async def flow(x: int) -> int:
        return await double(x)

    @manager.register_workflow(name="waiter")
    async def waiter() -> str:
        return str(await manager.signal("go").receive(str))


class _WatchedClock(SystemClock):
    """The real clock, counting the sleeps of each duration under way."""

    def __init__(self) -> None:
        self.sleeping: collections.Counter[float] = collections.Counter()

    async def sleep(self, seconds: float) -> None:
        self.sleeping[seconds] += 1
        try:
            await super().sleep(seconds)
        finally:
            self.sleeping[seconds] -= 1


async def test_new_work_results_and_signals_cross_processes_by_notification(
    postgres_url: str,
) -> None:
    worker_clock = _WatchedClock()
    client = sw.Manager(postgres_url, poll_interval=SLOW_POLL)
    worker = sw.Manager(postgres_url, poll_interval=SLOW_POLL, clock=worker_clock)
    _define(client)
    _define(worker)
    async with worker:
        # The worker heard its own probe notice before its workers started (so no late
        # "listening" notice wakes it for another scan), has done its first scan and sleeps for
        # an hour: from here on only a notice can make it look for work within the test.
        assert engine_of(worker).notifications
        await _until(lambda: worker_clock.sleeping[SLOW_POLL] > 0)
        async with client.connect():
            assert await client.workflow("flow", 21).execute_get(timeout=10) == 42
            handle = await client.workflow("waiter").execute()
            while await handle.status() is not sw.WorkflowStatus.WAITING:  # noqa: ASYNC110
                await asyncio.sleep(0.01)
            await client.signal("go").send(handle.key, "now")
            assert await handle.result(timeout=10) == "now"


async def test_terminate_from_another_process_stops_the_running_workflow(
    postgres_url: str,
) -> None:
    entered = asyncio.Event()
    client = sw.Manager(postgres_url, poll_interval=SLOW_POLL)
    worker = sw.Manager(postgres_url, poll_interval=SLOW_POLL, lease_timeout=3600)
    _define(client)
    _define(worker, entered)
    async with worker, client.connect():
        handle = await client.workflow("flow", 1).execute(idempotency_key="c1")
        await asyncio.wait_for(entered.wait(), 10)
        assert await client.terminate("c1")
        assert worker.worker is not None

        async def stopped() -> None:
            while worker.worker is not None and worker.worker.running_ids:  # noqa: ASYNC110
                await asyncio.sleep(0.01)

        # Without the notification the worker would notice at its next heartbeat, in 20 min.
        await asyncio.wait_for(stopped(), 10)
        assert await handle.status() is sw.WorkflowStatus.TERMINATED


async def test_starts_made_together_wake_listeners_once(postgres_url: str) -> None:
    """A batch of starts no process owns is one 'ready:' notice (PostgreSQL drops repeats of a
    transaction), not one per start: every listening process would otherwise wake per start."""
    from sagaway.states import WorkflowStatus
    from sagaway.store import open_store
    from sagaway.store.records import Lease, NewWorkflow

    store = open_store(postgres_url)
    await store.open()
    notices: list[str] = []
    marker = asyncio.Event()

    def heard(notice: Notice) -> None:
        notices.append(encode(notice))
        if isinstance(notice, Ended):
            marker.set()

    try:
        await store.listen(heard)
        starts = [
            NewWorkflow(run_id=f"r{i}", key=f"k{i}", name="flow", args="[1]", args_hash="h")
            for i in range(10)
        ]
        await asyncio.gather(
            *(
                store.create_workflow(s, now=1.0 + i / 100, lease=None, replace_live=False)
                for i, s in enumerate(starts)
            )
        )
        # A notice sent after all of them: once it is heard, every earlier one has been too.
        owned = Lease("t", "me", 99.0)
        await store.create_workflow(
            NewWorkflow(run_id="m", key="m", name="flow", args="[1]", args_hash="h"),
            now=2.0,
            lease=owned,
            replace_live=False,
        )
        await store.finish_workflow(
            "m", token="t", status=WorkflowStatus.COMPLETED, result="1", error=None, now=3.0
        )
        await asyncio.wait_for(marker.wait(), 10)
    finally:
        await store.close()
    ready = [n for n in notices if n.startswith("ready:")]
    # The first start found nothing under way and went alone; the nine made meanwhile went in
    # one statement, one transaction, one notice (not nine).
    assert ready == ["ready:", "ready:"]


def _define_gated(manager: sw.Manager, entered: asyncio.Event, gate: asyncio.Event) -> None:
    @manager.register_activity(name="gated_step")
    async def gated_step(x: int) -> int:
        entered.set()
        await gate.wait()
        return x + 1

    @manager.register_workflow(name="gated")
    async def gated(x: int) -> int:
        return await gated_step(x)


def _count_reads(manager: sw.Manager) -> list[str]:
    store = store_of(manager)
    reads: list[str] = []
    original = store.get_run

    async def counted(run_id: str) -> Any:
        reads.append(run_id)
        return await original(run_id)

    store.get_run = counted  # type: ignore[method-assign]
    return reads


async def test_a_client_waits_for_a_result_on_the_notice_not_by_polling(
    postgres_url: str,
) -> None:
    """While notifications flow, a waiting client reads the run once, then sleeps until the
    end's notice (poll_interval is only a safety net): no read every few milliseconds."""
    entered, gate = asyncio.Event(), asyncio.Event()
    clock = FakeClock()  # the client's waits: what it sleeps for is visible
    client = sw.Manager(postgres_url, poll_interval=30.0, clock=clock)
    worker = sw.Manager(postgres_url, poll_interval=SLOW_POLL)
    _define_gated(client, entered, gate)
    _define_gated(worker, entered, gate)
    async with worker, client.connect():
        engine = engine_of(client)
        assert not engine.notifications  # nothing to hear before its first wait
        engine.want_ends()  # what its first wait does (then it polls until they are heard)
        await _until(lambda: engine.end_notices is True and engine.notifications)
        reads = _count_reads(client)
        handle = await client.workflow("gated", 1).execute()
        await asyncio.wait_for(entered.wait(), 10)
        waiting = asyncio.ensure_future(handle.result())
        try:
            await clock.wait_for_sleep(30.0)  # polling would sleep 0.02 s, then 0.04 s, ...
            assert reads == [handle.run_id]
            gate.set()
            assert await asyncio.wait_for(waiting, 10) == 2  # woken by the notice, not the clock
        finally:
            waiting.cancel()
    assert len(reads) == 2


async def test_waiters_poll_while_notifications_are_down(postgres_url: str) -> None:
    """When the notification connection drops, every waiter looks again and polls until it is
    back: an end announced meanwhile is not missed."""
    entered, gate = asyncio.Event(), asyncio.Event()
    app = f"sagaway_deaf_{uuid.uuid4().hex[:8]}"
    clock = FakeClock()
    client = sw.Manager(f"{postgres_url}&application_name={app}", poll_interval=30.0, clock=clock)
    worker = sw.Manager(postgres_url, poll_interval=SLOW_POLL)
    _define_gated(client, entered, gate)
    _define_gated(worker, entered, gate)
    async with worker, client.connect():
        engine = engine_of(client)
        handle = await client.workflow("gated", 1).execute(idempotency_key="deaf-1")
        await asyncio.wait_for(entered.wait(), 10)
        waiting = asyncio.ensure_future(handle.result())
        try:
            await clock.wait_for_sleep(30.0)

            store: Any = engine.store
            store._conninfo = "host=127.0.0.1 port=1 connect_timeout=2"  # it cannot come back
            with psycopg.connect(POSTGRES_URL, autocommit=True) as admin:
                admin.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE application_name = %s",
                    (app,),
                )
            await clock.wait_for_sleep(lambda seconds: seconds < 1.0)  # woken, now polling
            assert not engine.notifications and not waiting.done()

            gate.set()  # ends in the worker; its notice cannot reach the client
            assert await worker.get_workflow("deaf-1").result(timeout=10) == 2
            await clock.advance(1.0)
            assert await asyncio.wait_for(waiting, 10) == 2
        finally:
            waiting.cancel()


async def test_notices_that_never_arrive_leave_waiters_polling(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """LISTEN can succeed and deliver nothing (a pooler in transaction mode): the listener's own
    probe notice never comes back, so the process is not counted as notified and polls."""
    from sagaway.store.postgres import listener as _pg_listener

    async def lost(self: Any, conn: Any, probe: str) -> None:
        return None  # as if the notice went to a server connection we are not on

    monkeypatch.setattr(_pg_listener.Listener, "_send_probe", lost)
    monkeypatch.setattr(_pg_listener, "_PROBE_WAIT", 0.2)
    entered, gate = asyncio.Event(), asyncio.Event()
    clock = FakeClock()
    client = sw.Manager(postgres_url, poll_interval=30.0, clock=clock)
    worker = sw.Manager(postgres_url, poll_interval=SLOW_POLL)
    _define_gated(client, entered, gate)
    _define_gated(worker, entered, gate)
    async with worker, client.connect():
        handle = await client.workflow("gated", 1).execute(idempotency_key="silent-1")
        await asyncio.wait_for(entered.wait(), 10)
        waiting = asyncio.ensure_future(handle.result())  # its first wait: it listens now
        try:
            await clock.wait_for_sleep(lambda seconds: seconds < 1.0)  # polling, not 30 s
            assert not engine_of(client).notifications
            assert [r for r in caplog.records if "do not arrive" in r.getMessage()]
            gate.set()
            assert await worker.get_workflow("silent-1").result(timeout=10) == 2
            await clock.advance(1.0)
            assert await asyncio.wait_for(waiting, 10) == 2
        finally:
            waiting.cancel()


async def _until(condition: Any, seconds: float = 10.0) -> None:
    """Wait for a state another task changes (bounded; fails the test on timeout)."""
    async with asyncio.timeout(seconds):
        while not condition():  # noqa: ASYNC110
            await asyncio.sleep(0.01)


async def test_an_unanswered_probe_makes_the_listener_reconnect(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A listening connection that stops delivering (half-open, say) is found by its next probe:
    the process stops counting on notices, reconnects, and counts on them again once heard."""
    from sagaway.store.postgres import connection as postgres
    from sagaway.store.postgres import listener as _pg_listener

    monkeypatch.setattr(postgres, "_PROBE_EVERY", 0.2)
    manager = sw.Manager(postgres_url, poll_interval=SLOW_POLL)
    async with manager:  # a process that runs workflows listens from the start
        engine = engine_of(manager)
        assert engine.notifications
        send = _pg_listener.Listener._send_probe

        async def lost(self: Any, conn: Any, probe: str) -> None:
            return None

        monkeypatch.setattr(_pg_listener.Listener, "_send_probe", lost)
        await _until(lambda: not engine.notifications)
        monkeypatch.setattr(_pg_listener.Listener, "_send_probe", send)
        await _until(lambda: engine.notifications)
