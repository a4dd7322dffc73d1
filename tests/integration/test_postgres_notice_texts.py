"""The notices' text is the database's: what PostgreSQL's triggers write (the migrations'
``sagaway_notify``, ``sagaway_notify_schedules``) is read back, byte for byte, by
``store.notices``, on every channel; and a text that is not a notice (a newer Sagaway's, or
someone else's NOTIFY on the channel) is dropped with a log line while the listener, the
Engine and the Engine Server's Watch stream go on with the next one."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

import psycopg
import pytest

import sagaway as sw
from sagaway.states import WorkflowStatus
from sagaway.store import notices, open_store
from sagaway.store.grpc import GrpcStore
from sagaway.store.notices import CancelRequested, Ended, Notice
from sagaway.store.postgres import PostgresStore, parse_postgres_url
from sagaway.store.postgres import listener as _pg_listener
from sagaway.store.records import Lease, NewWorkflow, SchedulePut
from sagaway.testing.internals import engine_of
from tests.conftest import served
from tests.grpc_server import direct_url
from tests.integration.test_store_schedules import schedule

pytestmark = pytest.mark.postgres


class Raw:
    """A plain LISTEN connection: the texts as the database sent them, by channel."""

    def __init__(self, conn: psycopg.AsyncConnection[tuple[object, ...]]) -> None:
        self.conn = conn
        self.heard: list[tuple[str, str]] = []

    async def until(self, channel: str, payload: str) -> None:
        async with asyncio.timeout(10):
            async for note in self.conn.notifies():
                self.heard.append((note.channel, note.payload))
                if (note.channel, note.payload) == (channel, payload):
                    return


@pytest.fixture
async def store(postgres_url: str) -> AsyncIterator[PostgresStore]:
    store = open_store(postgres_url)
    assert isinstance(store, PostgresStore)
    await store.open()
    try:
        yield store
    finally:
        await store.close()


def _conninfo(url: str) -> str:
    return parse_postgres_url(url)[0]


async def _raw(url: str, *channels: str) -> Raw:
    conn = await psycopg.AsyncConnection.connect(_conninfo(url), autocommit=True)
    for channel in channels:
        await conn.execute(psycopg.sql.SQL("LISTEN {}").format(psycopg.sql.Identifier(channel)))
    return Raw(conn)


def _new(run_id: str) -> NewWorkflow:
    return NewWorkflow(run_id=run_id, key=run_id, name="flow", args="[1]", args_hash="h")


async def test_the_triggers_texts_are_the_ones_decoded(
    postgres_url: str, store: PostgresStore
) -> None:
    owner = _pg_listener.owner_channel(store.schema, "them")
    raw = await _raw(postgres_url, store.channel, store.runs_channel, owner)
    run_id = "r:1/ü"  # a colon in the run id stays in it
    try:
        await store.create_workflow(_new("unowned"), now=1.0, lease=None, replace_live=False)
        lease = Lease("t", "them", 99.0)
        await store.create_workflow(_new(run_id), now=1.0, lease=lease, replace_live=False)
        assert await store.request_cancel(run_id, reason="stop", now=1.5)
        # Ended by someone other than its owner: told on the owner's channel too.
        assert await store.end_workflow(run_id, status=WorkflowStatus.TERMINATED, error="x", now=2)
        await store.put_schedule(SchedulePut(schedule=schedule(), keep_paused=False), now=3.0)
        await raw.until(store.channel, "schedules:")
    finally:
        await raw.conn.close()
    expected: list[tuple[str, str, Notice]] = [
        (store.channel, "ready:", notices.READY),
        (store.runs_channel, f"cancel:{run_id}", CancelRequested(run_id)),
        (owner, f"cancel:{run_id}", CancelRequested(run_id)),
        (store.runs_channel, f"ended:{run_id}", Ended(run_id)),
        (owner, f"ended:{run_id}", Ended(run_id)),
        (store.channel, "schedules:", notices.SCHEDULES_CHANGED),
    ]
    assert raw.heard == [(channel, text) for channel, text, _ in expected]
    for _, text, notice in expected:
        assert notices.decode(text) == notice
        assert notices.encode(notice) == text


async def test_the_store_passes_on_what_the_triggers_wrote_as_typed_notices(
    store: PostgresStore,
) -> None:
    """The same texts through ``PostgresStore.listen``: ``Listening`` of each listener, then
    the notices; the listener's own probes are never passed on."""
    heard: list[Notice] = []
    got = asyncio.Event()

    def on_notice(notice: Notice) -> None:
        heard.append(notice)
        got.set()

    await store.listen(on_notice, owner="me", ends=True)
    assert heard == [notices.Listening(), notices.Listening("ends")]
    await store.create_workflow(
        _new("mine"), now=1.0, lease=Lease("t", "me", 9.0), replace_live=False
    )
    assert await store.request_cancel("mine", reason="stop", now=1.5)
    assert await store.end_workflow("mine", status=WorkflowStatus.TERMINATED, error="x", now=2)
    await store.put_schedule(SchedulePut(schedule=schedule(), keep_paused=False), now=3.0)
    async with asyncio.timeout(10):
        while notices.SCHEDULES_CHANGED not in heard:
            got.clear()
            await got.wait()
    # Owner and every-run channels both bring the cancel and the end (two connections: their
    # order between the two is not fixed).
    rest = heard[2:]
    assert sorted(map(notices.encode, rest)) == sorted(
        ["cancel:mine", "cancel:mine", "ended:mine", "ended:mine", "schedules:"]
    )
    assert not any(isinstance(n, notices.Probe) for n in heard)


async def _notify(url: str, channels: tuple[str, ...], payload: str) -> None:
    async with await psycopg.AsyncConnection.connect(_conninfo(url), autocommit=True) as conn:
        for channel in channels:
            await conn.execute("SELECT pg_notify(%s, %s)", (channel, payload))


def _ignored(caplog: pytest.LogCaptureFixture, text: str) -> bool:
    return any(
        r.name == "sagaway.store.notices" and repr(text) in r.getMessage() for r in caplog.records
    )


async def test_a_text_that_is_not_a_notice_is_dropped_and_the_next_heard(
    postgres_url: str, store: PostgresStore, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="sagaway.store.notices")
    heard: list[Notice] = []
    got = asyncio.Event()

    def on_notice(notice: Notice) -> None:
        heard.append(notice)
        got.set()

    await store.listen(on_notice, ends=False)
    for text in ("started:r1", "ended:", "not a notice"):
        await _notify(postgres_url, (store.channel,), text)
    await store.create_workflow(_new("after"), now=1.0, lease=None, replace_live=False)
    async with asyncio.timeout(10):
        while notices.READY not in heard:
            got.clear()
            await got.wait()
    assert heard == [notices.Listening(), notices.READY]
    for text in ("started:r1", "ended:", "not a notice"):
        assert _ignored(caplog, text), text


def _define(manager: sw.Manager) -> None:
    @manager.register_workflow(name="gated")
    async def gated() -> int:
        await manager.signal("go").receive(int)
        return 7


async def test_a_manager_waiting_for_a_result_goes_on_past_a_foreign_notice(
    postgres_url: str, store: PostgresStore, caplog: pytest.LogCaptureFixture
) -> None:
    """The Engine never sees what is not a notice: its listener drops it, and the end that
    comes next still wakes the waiting ``result()``."""
    caplog.set_level(logging.DEBUG, logger="sagaway.store.notices")
    client, worker = sw.Manager(postgres_url, poll_interval=60.0), sw.Manager(postgres_url)
    _define(client)
    _define(worker)
    async with worker, client.connect():
        handle = await client.workflow("gated").execute(idempotency_key="g")
        waiting = asyncio.ensure_future(handle.result())
        try:
            async with asyncio.timeout(10):
                # Its first wait listens for ends; no event says so but the Engine's flag.
                while not engine_of(client).end_notices:  # noqa: ASYNC110
                    await asyncio.sleep(0.01)
            channels = (store.channel, store.runs_channel)
            await _notify(postgres_url, channels, "ended")  # no colon: not a notice
            await client.signal("go").send("g", 1)
            # Polls every 60 s: only the end's notice can wake it within the test's bound.
            assert await asyncio.wait_for(waiting, 10) == 7
        finally:
            waiting.cancel()
    assert _ignored(caplog, "ended")


@pytest.mark.grpc
async def test_the_engine_server_drops_a_foreign_notice_and_streams_the_next(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """What the server's database says that is not a notice never reaches a Watch stream;
    the notices after it do, as their exact text decoded by the client."""
    with served("postgres") as url:
        direct = open_store(direct_url(url))
        client = open_store(url)
        assert isinstance(direct, PostgresStore) and isinstance(client, GrpcStore)
        await direct.open()
        await client.open()
        heard: list[Notice] = []
        got = asyncio.Event()

        def on_notice(notice: Notice) -> None:
            heard.append(notice)
            got.set()

        try:
            await client.listen(on_notice)
            async with asyncio.timeout(10):
                while notices.Listening() not in heard:
                    got.clear()
                    await got.wait()
            await _notify(direct_url(url), (direct.channel, direct.runs_channel), "started:r1")
            await direct.create_workflow(_new("after"), now=1.0, lease=None, replace_live=False)
            async with asyncio.timeout(10):
                while notices.READY not in heard:
                    got.clear()
                    await got.wait()
        finally:
            await client.close()
            await direct.close()
    assert all(n in (notices.Listening(), notices.Listening("ends"), notices.READY) for n in heard)
