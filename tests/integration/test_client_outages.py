"""Client calls through an outage of the database or the Engine Server: a start, a signal with
a dedupe id, a cancel, a status read and a result wait ride it out for the Manager's
``unavailable_timeout``, then raise ``sagaway.EngineUnavailable``.

Real outages: the Engine Server killed and started again on its address (in front of SQLite
and of PostgreSQL), and PostgreSQL cut off by a TCP proxy (tests/faults.py). Exact ones: the
store of an open Manager wrapped so that the test switches failures on and off, on every
backend, with a FakeClock for the budgets and deadlines.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from pathlib import Path
from typing import Any

import pytest

import sagaway as sw
from sagaway.store.base import StoreUnavailable
from sagaway.testing import FakeClock
from tests.conftest import _fresh_postgres_url
from tests.faults import PgProxy
from tests.grpc_server import ServerProcess

WAIT = 60.0
"""Bound of every wait: a broken client fails the test instead of hanging it."""


def define(manager: sw.Manager) -> None:
    @manager.register_workflow(name="flow")
    async def flow() -> str:
        return str(await manager.signal("go").receive(str))


class Failures(logging.Handler):
    """The client calls seen failing for want of the database (their ``call`` names), from
    any thread."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__()
        self.calls: set[str] = set()
        self._loop = loop
        self._changed = asyncio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if getattr(record, "action", None) == "wait_unavailable":
            call = str(getattr(record, "call", ""))
            self._loop.call_soon_threadsafe(self._seen, call)

    def _seen(self, call: str) -> None:
        self.calls.add(call)
        self._changed.set()

    async def all_of(self, calls: set[str]) -> None:
        while not calls <= self.calls:
            self._changed.clear()
            await self._changed.wait()


@pytest.fixture
async def failures() -> AsyncIterator[Failures]:
    handler = Failures(asyncio.get_running_loop())
    log = logging.getLogger("sagaway._engine.outages")
    log.addHandler(handler)
    try:
        yield handler
    finally:
        log.removeHandler(handler)


def calls_during_outage(client: sw.Manager) -> dict[str, Coroutine[Any, Any, Any]]:
    """One of each call that rides an outage out, by the name its failures are logged under."""
    return {
        "start of workflow 'w3'": client.workflow("flow").execute(idempotency_key="w3"),
        "signal 'go' to workflow 'w1'": client.signal("go").send("w1", "x", dedupe_id="d1"),
        "cancel workflow 'w2'": client.cancel("w2"),
        "status of workflow 'w1'": client.get_workflow("w1").status(),
        "result of workflow 'w1'": client.get_workflow("w1").result(timeout=WAIT),
    }


async def ride_out(
    calls: dict[str, Coroutine[Any, Any, Any]], failures: Failures, end_outage: Callable[[], Any]
) -> dict[str, Any]:
    """Run ``calls`` until each has failed for want of the database, end the outage, and
    return what each answered then."""
    tasks = {what: asyncio.ensure_future(call) for what, call in calls.items()}
    try:
        seen = asyncio.ensure_future(failures.all_of(set(tasks)))
        first = asyncio.FIRST_COMPLETED
        await asyncio.wait([seen, *tasks.values()], timeout=WAIT, return_when=first)
        seen.cancel()
        ended = {what: task for what, task in tasks.items() if task.done()}
        assert not ended, f"calls ended during the outage: {ended}"
        assert failures.calls >= set(tasks), failures.calls
        await end_outage()
        return {what: await asyncio.wait_for(task, WAIT) for what, task in tasks.items()}
    finally:
        for task in tasks.values():
            task.cancel()  # a failed test leaves none running


async def check_answers(client: sw.Manager, answers: dict[str, Any]) -> None:
    assert answers["start of workflow 'w3'"].key == "w3"
    assert answers["signal 'go' to workflow 'w1'"] is True
    assert answers["cancel workflow 'w2'"] is True
    assert isinstance(answers["status of workflow 'w1'"], sw.WorkflowStatus)
    assert answers["result of workflow 'w1'"] == "x"
    with pytest.raises(sw.WorkflowCancelled):
        await client.get_workflow("w2").result(timeout=WAIT)
    keys = sorted(d.key for d in await client.list_workflows())
    assert [key for key in keys if key != "w4"] == ["w1", "w2", "w3"]


# ----------------------------------------------------------------------------- Engine Server


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """The database behind a test's own Engine Server."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path}/engine.db"
    else:
        yield from _fresh_postgres_url()


@pytest.mark.grpc
@pytest.mark.slow
async def test_client_calls_ride_through_an_engine_server_restart(
    database: str, failures: Failures
) -> None:
    first = await asyncio.to_thread(ServerProcess(database).start)
    servers = [first]

    async def restart() -> None:
        servers.append(await asyncio.to_thread(ServerProcess(database, listen=first.address).start))

    try:
        worker = sw.Manager(first.url, poll_interval=0.1, lease_timeout=2)
        client = sw.Manager(first.url, poll_interval=0.1)
        define(worker)
        define(client)
        sync = client.sync()
        async with worker, client.connect():
            await asyncio.to_thread(sync.open)
            try:
                await client.workflow("flow").execute(idempotency_key="w1")
                await client.workflow("flow").execute(idempotency_key="w2")
                await asyncio.to_thread(first.kill)  # kill -9: every call fails until it is back
                calls = calls_during_outage(client)
                # The SyncClient's own loop rides it out too.
                calls["start of workflow 'w4'"] = asyncio.to_thread(
                    lambda: sync.start("flow", key="w4").key
                )
                answers = await ride_out(calls, failures, restart)
                assert answers.pop("start of workflow 'w4'") == "w4"
                await client.signal("go").send("w4", "y")
                await client.signal("go").send("w3", "z")
                await check_answers(client, answers)
                assert await asyncio.to_thread(lambda: sync.get_workflow("w4").result(WAIT)) == "y"
            finally:
                await asyncio.to_thread(sync.close)
    finally:
        for server in servers:
            await asyncio.to_thread(server.kill)
            server.__exit__()


@pytest.mark.grpc
async def test_past_the_budget_a_client_call_raises_engine_unavailable(
    database: str, failures: Failures
) -> None:
    server = await asyncio.to_thread(ServerProcess(database).start)
    try:
        client = sw.Manager(server.url, unavailable_timeout=0.5)
        define(client)
        sync = sw.SyncClient(server.url, unavailable_timeout=0.5)
        async with client.connect():
            await asyncio.to_thread(sync.open)
            try:
                await asyncio.to_thread(server.kill)
                began = time.monotonic()
                with pytest.raises(sw.EngineUnavailable) as raised:
                    await client.workflow("flow").execute(idempotency_key="k")
                assert 0.5 <= time.monotonic() - began < 10
                message = str(raised.value)
                assert message.startswith("start of workflow 'k': the Engine Server at ")
                assert server.address in message
                assert "did not answer for 0." in message
                assert "unavailable_timeout=0.5 s" in message
                assert "Manager(unavailable_timeout=...)" in message
                assert raised.value.waited is not None and raised.value.waited >= 0.5
                assert "start of workflow 'k'" in failures.calls  # it was tried again
                with pytest.raises(sw.EngineUnavailable, match=r"unavailable_timeout=0\.5 s"):
                    await asyncio.to_thread(sync.start, "flow", key="s")
            finally:
                await asyncio.to_thread(sync.close)
    finally:
        server.__exit__()


# ----------------------------------------------------------------------------- PostgreSQL


@pytest.mark.postgres
async def test_client_calls_ride_through_a_postgres_outage(
    postgres_url: str, failures: Failures
) -> None:
    async with PgProxy(postgres_url) as proxy:
        # The client alone goes through the proxy, and gives up on a connection after 0.3 s:
        # each of its calls fails soon into the outage, and is tried again.
        client = sw.Manager(
            f"{proxy.url(postgres_url)}&pool_timeout=0.3&reconnect_delay=0.1", poll_interval=0.1
        )
        worker = sw.Manager(postgres_url, poll_interval=0.1)
        define(worker)
        define(client)
        async with worker, client.connect():
            await client.workflow("flow").execute(idempotency_key="w1")
            await client.workflow("flow").execute(idempotency_key="w2")
            proxy.outage()

            async def restore() -> None:
                proxy.restore()

            answers = await ride_out(calls_during_outage(client), failures, restore)
            await client.signal("go").send("w3", "z")
            await check_answers(client, answers)


@pytest.mark.postgres
async def test_past_the_budget_a_postgres_client_raises_engine_unavailable(
    postgres_url: str,
) -> None:
    async with PgProxy(postgres_url) as proxy:
        client = sw.Manager(
            f"{proxy.url(postgres_url)}&pool_timeout=0.3&reconnect_delay=0.1",
            unavailable_timeout=1.0,
        )
        define(client)
        async with client.connect():
            await client.workflow("flow").execute(idempotency_key="w1")
            proxy.outage()
            began = time.monotonic()
            with pytest.raises(sw.EngineUnavailable) as raised:
                await client.signal("go").send("w1", "x", dedupe_id="d")
            assert 1.0 <= time.monotonic() - began < 10
            assert str(raised.value).startswith("signal 'go' to workflow 'w1': PostgreSQL at ")
            assert "unavailable_timeout=1 s" in str(raised.value)
            # Without a dedupe id a send is tried once, and says so.
            with pytest.raises(sw.EngineUnavailable, match="send with dedupe_id="):
                await client.signal("go").send("w1", "x")
            proxy.restore()


# ----------------------------------------------------------------------------- exact faults


class FlakyStore:
    """The store of an open Manager, failing as the test says: every call while ``down``, and
    the answer of the next ``lose`` calls of a method after it ran (a lost acknowledgement)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.down = False
        self.lose: dict[str, int] = {}
        self.lost = 0

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if not inspect.iscoroutinefunction(attr) or name in ("open", "close", "listen"):
            return attr

        async def call(*args: Any, **kwargs: Any) -> Any:
            if self.down:
                raise StoreUnavailable("the test's outage")
            answer = await attr(*args, **kwargs)
            if self.lose.get(name):
                self.lose[name] -= 1
                self.lost += 1
                raise StoreUnavailable("the test lost the answer")
            return answer

        return call


def flaky(manager: sw.Manager) -> FlakyStore:
    engine = manager._require_engine()
    store = FlakyStore(engine.store)
    engine.store = store  # type: ignore[assignment]
    return store


async def until_done(clock: FakeClock, task: asyncio.Future[Any], limit: float) -> float:
    """Move ``clock`` on in 0.1 s steps until ``task`` is done; the seconds it took."""
    began = clock.now()
    while not task.done():
        assert clock.now() - began < limit, "the call did not end in time"
        await clock.advance(0.1)
        await asyncio.sleep(0.005)  # the store's own threads and sockets answer in real time
    return clock.now() - began


async def run_for(clock: FakeClock, seconds: float) -> None:
    """Move ``clock`` on by ``seconds`` in 0.1 s steps, letting the loop run at each."""
    began = clock.now()
    while clock.now() - began < seconds:
        await clock.advance(0.1)
        await asyncio.sleep(0)


@pytest.mark.parametrize("key", ["k", None])
async def test_a_start_whose_answer_was_lost_creates_one_execution(
    db_url: str, key: str | None
) -> None:
    """The first attempt committed, its answer was lost: the retry finds the execution that
    attempt made and reports it created, even under OnConflict.FAIL and without a key."""
    manager = sw.Manager(db_url)
    define(manager)
    async with manager.connect():
        store = flaky(manager)
        store.lose["create_workflow"] = 1
        handle = await manager.workflow("flow").execute(
            idempotency_key=key, on_conflict=sw.OnConflict.FAIL
        )
        assert store.lost == 1, "no answer was lost: the test tested nothing"
        listed = await manager.list_workflows()
        assert [(d.key, d.run_id) for d in listed] == [(handle.key, handle.run_id)]
        assert await handle.status() is sw.WorkflowStatus.PENDING


Call = Callable[[sw.Manager, sw.WorkflowHandle[Any]], Coroutine[Any, Any, Any]]
CALLS: dict[str, tuple[str, Call]] = {
    "start": ("start of workflow 'new'", lambda m, h: m.workflow("flow").execute()),
    "signal": (
        "signal 'go' to workflow 'w'",
        lambda m, h: m.signal("go").send("w", 1, dedupe_id="d"),
    ),
    "cancel": ("cancel workflow 'w'", lambda m, h: m.cancel("w")),
    "status": ("status of workflow 'w'", lambda m, h: m.get_workflow("w").status()),
    "describe": ("describe workflow 'w'", lambda m, h: m.get_workflow("w").describe()),
    "result": ("result of workflow 'w'", lambda m, h: m.get_workflow("w").result()),
    # The handle execute() returned watches the run it started at once (end_wait).
    "result-of-started": ("result of workflow 'w'", lambda m, h: h.result()),
}


@pytest.mark.parametrize("call", list(CALLS))
async def test_a_client_call_gives_up_when_the_outage_outlasts_its_budget(
    db_url: str, call: str
) -> None:
    clock = FakeClock()
    manager = sw.Manager(db_url, clock=clock, unavailable_timeout=5)
    define(manager)
    what, make = CALLS[call]
    if call == "start":
        what = "start of workflow '"  # a key drawn at random
    async with manager.connect():
        handle = await manager.workflow("flow").execute(idempotency_key="w")
        store = flaky(manager)
        store.down = True
        task = asyncio.ensure_future(make(manager, handle))
        took = await until_done(clock, task, limit=30)
        with pytest.raises(sw.EngineUnavailable) as raised:
            task.result()
        assert 5 <= took <= 6.1
        assert str(raised.value).startswith(what)
        assert "did not answer for 5." in str(raised.value)
        assert "unavailable_timeout=5 s" in str(raised.value)
        store.down = False


async def test_a_call_rides_out_an_outage_shorter_than_its_budget(db_url: str) -> None:
    clock = FakeClock()
    manager = sw.Manager(db_url, clock=clock, unavailable_timeout=5)
    define(manager)
    async with manager.connect():
        store = flaky(manager)
        store.down = True
        task = asyncio.ensure_future(manager.workflow("flow").execute(idempotency_key="k"))
        await run_for(clock, 4)
        assert not task.done()
        store.down = False
        await until_done(clock, task, limit=2)
        assert task.result().key == "k"


async def test_a_result_wait_keeps_its_deadline_through_an_outage(db_url: str) -> None:
    """result(timeout=10) during a 6 s outage: TimeoutError 10 s after the call, not 10 s
    after the outage (the wait after the first read used to start the timeout again)."""
    clock = FakeClock()
    manager = sw.Manager(db_url, clock=clock, poll_interval=0.5)
    define(manager)
    async with manager.connect():
        await manager.workflow("flow").execute(idempotency_key="w")
        store = flaky(manager)
        store.down = True
        task = asyncio.ensure_future(manager.get_workflow("w").result(timeout=10))
        await run_for(clock, 6)
        assert not task.done()
        store.down = False
        took = 6 + await until_done(clock, task, limit=20)
        with pytest.raises(TimeoutError):
            task.result()
        assert took <= 10.6


async def test_a_signal_without_dedupe_id_is_sent_once(db_url: str) -> None:
    manager = sw.Manager(db_url)
    define(manager)
    async with manager.connect():
        await manager.workflow("flow").execute(idempotency_key="w")
        store = flaky(manager)
        store.lose["send_signal"] = 1
        with pytest.raises(sw.EngineUnavailable, match="may or may not have been stored"):
            await manager.signal("go").send("w", "x")
        assert store.lost == 1
        assert len(await manager.list_signals("w")) == 1  # stored once, not sent again


def test_unavailable_timeout_is_checked() -> None:
    assert sw.Manager("sqlite:///x.db").options.unavailable_timeout == 30.0
    assert sw.Manager("sqlite:///x.db", unavailable_timeout=0).options.unavailable_timeout == 0
    for bad in (-1, float("inf"), float("nan")):
        with pytest.raises(ValueError, match="unavailable_timeout must be"):
            sw.Manager("sqlite:///x.db", unavailable_timeout=bad)
    with pytest.raises(TypeError, match="unavailable_timeout must be a number"):
        sw.Manager("sqlite:///x.db", unavailable_timeout="30")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="not both"):
        sw.SyncClient(manager=sw.Manager("sqlite:///x.db"), unavailable_timeout=1)
    assert issubclass(StoreUnavailable, sw.EngineUnavailable)
