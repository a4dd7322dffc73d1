"""sagaway.toolkit.outbox on SQLite and PostgreSQL: table, relay, inbox, publishers."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import subprocess
import sys
import threading
import uuid
from decimal import Decimal
from typing import Any

import pytest

import sagaway as sw
from sagaway.testing import FakeClock
from sagaway.toolkit import localdb
from sagaway.toolkit.outbox import (
    CallbackPublisher,
    Inbox,
    Message,
    Outbox,
    Relay,
    UnroutableMessage,
    WorkflowPublisher,
    _optional,
)
from tests.toolkit import brokers
from tests.toolkit.conftest import ServiceDB


def orders_table(db: ServiceDB, conn: Any) -> None:
    with localdb.transaction(conn):
        conn.execute("CREATE TABLE orders (id TEXT PRIMARY KEY, status TEXT NOT NULL)")


def place(db: ServiceDB, conn: Any, outbox: Outbox, order_id: str, **payload: Any) -> str:
    """The business update and its message, in one local transaction."""
    with localdb.transaction(conn):
        conn.execute(f"INSERT INTO orders (id, status) VALUES ({db.param}, 'PLACED')", (order_id,))
        return outbox.put(
            conn, "order.placed", {"order_id": order_id, **payload}, message_id=f"placed-{order_id}"
        )


class Recorder:
    """A publisher that records what it is given, optionally failing on chosen message ids."""

    def __init__(self) -> None:
        self.seen: list[Message] = []
        self.fail_on: set[str] = set()

    async def publish(self, message: Message) -> None:
        await asyncio.sleep(0)  # let other relays interleave
        if message.message_id in self.fail_on:
            raise ConnectionError("broker unavailable")
        self.seen.append(message)


def rows(db: ServiceDB, conn: Any) -> list[tuple[Any, ...]]:
    result = conn.execute(
        "SELECT message_id, attempts, sent_at IS NOT NULL, last_error FROM sagaway_outbox "
        "ORDER BY id"
    ).fetchall()
    if db.dialect is localdb.Dialect.POSTGRES:
        conn.commit()
    return [tuple(r) for r in result]


# --------------------------------------------------------------------------- the table


def test_a_message_commits_and_rolls_back_with_the_business_update(service_db: ServiceDB) -> None:
    conn = service_db.connect()
    outbox = Outbox()
    outbox.install(conn)
    outbox.install(conn)  # idempotent
    orders_table(service_db, conn)
    place(service_db, conn, outbox, "o-1", amount=Decimal("12.50"))

    class Crash(Exception):
        pass

    with pytest.raises(Crash), localdb.transaction(conn):
        conn.execute(f"INSERT INTO orders (id, status) VALUES ({service_db.param}, 'X')", ("o-2",))
        outbox.put(conn, "order.placed", {"order_id": "o-2"}, message_id="placed-o-2")
        raise Crash  # neither the order nor its message survive
    # The same message id again (a retried request) is written once.
    with localdb.transaction(conn):
        outbox.put(conn, "order.placed", {"order_id": "o-1"}, message_id="placed-o-1")
    assert [r[0] for r in rows(service_db, conn)] == ["placed-o-1"]
    assert outbox.pending_count(conn) == 1


def test_put_refuses_to_commit_alone_in_autocommit_mode(tmp_path: Any) -> None:
    import sqlite3

    conn = sqlite3.connect(tmp_path / "a.db", isolation_level=None)
    outbox = Outbox()
    outbox.install(conn)
    with pytest.raises(RuntimeError, match="inside the transaction of the business update"):
        outbox.put(conn, "t", {"x": 1})
    with localdb.transaction(conn):
        outbox.put(conn, "t", {"x": 1})
    assert outbox.pending_count(conn) == 1


# --------------------------------------------------------------------------- the relay


async def test_the_relay_publishes_in_order_once_and_marks_sent(service_db: ServiceDB) -> None:
    conn = service_db.connect()
    outbox = Outbox()
    outbox.install(conn)
    orders_table(service_db, conn)
    for i in range(5):
        place(service_db, conn, outbox, f"o-{i}", amount=Decimal("1.10"))
    recorder = Recorder()
    relay = Relay(outbox, service_db.connect(), recorder, batch_size=2)
    assert await relay.run_once() == 5
    assert await relay.run_once() == 0
    assert [m.message_id for m in recorder.seen] == [f"placed-o-{i}" for i in range(5)]
    assert recorder.seen[0].payload == {"order_id": "o-0", "amount": "1.10"}
    assert [m.sequence for m in recorder.seen] == sorted(m.sequence for m in recorder.seen)
    assert all(sent for _, _, sent, _ in rows(service_db, conn))
    assert outbox.pending_count(conn) == 0
    if service_db.dialect is localdb.Dialect.POSTGRES:
        conn.commit()
    assert outbox.purge_sent(conn, older_than=0) == 5


async def test_a_failed_publish_keeps_the_order_and_retries_later(service_db: ServiceDB) -> None:
    clock = FakeClock()
    conn = service_db.connect()
    outbox = Outbox(clock=clock)
    outbox.install(conn)
    orders_table(service_db, conn)
    for i in range(3):
        place(service_db, conn, outbox, f"o-{i}")
    recorder = Recorder()
    recorder.fail_on.add("placed-o-1")
    relay = Relay(outbox, service_db.connect(), recorder, retry_interval=30.0)
    with pytest.raises(ConnectionError):
        await relay.run_once()
    assert [m.message_id for m in recorder.seen] == ["placed-o-0"]
    state = rows(service_db, conn)
    assert state[0][2] is True or state[0][2] == 1
    assert state[1][3] == "ConnectionError: broker unavailable"
    assert not state[1][2] and not state[2][2]  # o-2 waits behind o-1: order is kept
    recorder.fail_on.clear()
    assert await relay.run_once() == 0  # deferred for retry_interval
    await clock.advance(30.0)
    assert await relay.run_once() == 2
    assert [m.message_id for m in recorder.seen] == ["placed-o-0", "placed-o-1", "placed-o-2"]
    assert [m.attempts for m in recorder.seen] == [1, 2, 2]


async def test_two_relays_share_an_outbox_without_double_publishing(service_db: ServiceDB) -> None:
    conn = service_db.connect()
    outbox = Outbox()
    outbox.install(conn)
    orders_table(service_db, conn)
    for i in range(40):
        place(service_db, conn, outbox, f"o-{i}")
    recorder = Recorder()
    relays = [
        Relay(outbox, service_db.connect(), recorder, name=f"relay-{n}", batch_size=3)
        for n in range(2)
    ]
    counts = await asyncio.gather(*(r.run_once() for r in relays))
    assert sum(counts) == 40 and all(c > 0 for c in counts)
    ids = [m.message_id for m in recorder.seen]
    assert sorted(ids) == sorted(f"placed-o-{i}" for i in range(40)) and len(set(ids)) == 40


async def test_run_publishes_until_stopped(sqlite_url: str, tmp_path: Any) -> None:
    conn = localdb.connect_sqlite(str(tmp_path / "svc.db"))
    outbox = Outbox()
    outbox.install(conn)
    got: list[str] = []
    arrived = asyncio.Event()

    def deliver(message: Message) -> None:
        got.append(message.message_id)
        arrived.set()

    relay = Relay(
        outbox, localdb.connect_sqlite(str(tmp_path / "svc.db")), CallbackPublisher(deliver),
        poll_interval=3600,
    )  # fmt: skip
    stop = asyncio.Event()
    task = asyncio.create_task(relay.run(stop))
    with localdb.transaction(conn):
        outbox.put(conn, "t", {"n": 1}, message_id="m-1")
    relay.wake()  # no hour-long poll: the writer wakes the relay
    await asyncio.wait_for(arrived.wait(), 10)
    stop.set()
    await asyncio.wait_for(task, 10)
    assert got == ["m-1"] and relay.published == 1


# --------------------------------------------------------------------------- the inbox


def test_the_inbox_processes_a_message_once(service_db: ServiceDB) -> None:
    conn = service_db.connect()
    inbox = Inbox("billing")
    inbox.install(conn)
    with localdb.transaction(conn):
        conn.execute("CREATE TABLE effects (message_id TEXT)")

    def effect(mid: str) -> Any:
        return lambda: conn.execute(
            f"INSERT INTO effects VALUES ({service_db.param})", (mid,)
        ) and mid  # fmt: skip

    assert inbox.process(conn, "m-1", effect("m-1")) == (True, "m-1")
    assert inbox.process(conn, "m-1", effect("m-1")) == (False, None)
    assert Inbox("shipping").process(conn, "m-1", effect("m-1"))[0] is True  # another consumer
    assert inbox.seen(conn, "m-1") and not inbox.seen(conn, "m-2")
    (count,) = conn.execute("SELECT count(*) FROM effects").fetchone()
    assert count == 2
    if service_db.dialect is localdb.Dialect.POSTGRES:
        conn.commit()
    assert inbox.purge(conn, older_than=-1) == 1


def test_concurrent_duplicates_are_processed_once(service_db: ServiceDB) -> None:
    """Eight consumers receive the same message at once; one applies it."""
    setup = service_db.connect()
    Inbox().install(setup)
    with localdb.transaction(setup):
        setup.execute("CREATE TABLE counter (n INTEGER)")
        setup.execute("INSERT INTO counter VALUES (0)")
    start = threading.Barrier(8)
    outcomes: list[bool] = []
    lock = threading.Lock()

    def consumer() -> None:
        conn = service_db.connect()
        inbox = Inbox()
        start.wait(timeout=20)
        done, _ = inbox.process(conn, "m-42", lambda: conn.execute("UPDATE counter SET n = n + 1"))
        with lock:
            outcomes.append(done)

    threads = [threading.Thread(target=consumer) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert sorted(outcomes) == [False] * 7 + [True]
    check = service_db.connect()
    assert check.execute("SELECT n FROM counter").fetchone()[0] == 1


# --------------------------------------------------------------------------- workflows


@dataclasses.dataclass(frozen=True)
class Placed:
    order_id: str
    amount: Decimal


async def test_the_workflow_publisher_starts_a_workflow_once_per_message(db_url: str) -> None:
    manager = sw.Manager(db_url, poll_interval=0.05)
    runs: list[Placed] = []

    @manager.register_workflow(name="fulfil_order")
    async def fulfil(order: Placed, priority: int = 0) -> str:
        runs.append(order)
        return f"{order.order_id}:{priority}"

    publisher = WorkflowPublisher(manager, {"order.placed": "fulfil_order"})
    message = Message(
        "msg-1", "order.placed", {"order": {"order_id": "o-9", "amount": "3.50"}, "priority": 2}
    )
    async with manager:
        await publisher.publish(message)
        await publisher.publish(message)  # redelivered: attaches, does not run again
        result = await manager.get_workflow("msg-1").result(timeout=30)
        with pytest.raises(UnroutableMessage, match="no workflow is routed to topic 'x'"):
            await publisher.publish(Message("msg-2", "x", {}))
        with pytest.raises(sw.PayloadError, match="JSON object keyed by parameter name"):
            await publisher.publish(Message("msg-3", "order.placed", [1, 2]))
    assert result == "o-9:2"
    assert runs == [Placed("o-9", Decimal("3.50"))]
    assert publisher.started == ["msg-1", "msg-1"]


async def test_choreography_feeds_orchestration_through_the_relay(
    db_url: str, tmp_path: Any
) -> None:
    """A service's outbox event starts a workflow: at least once, exactly one workflow."""
    manager = sw.Manager(db_url, poll_interval=0.05)

    @manager.register_workflow(name="fulfil")
    async def fulfil(order_id: str) -> str:
        return f"fulfilled {order_id}"

    conn = localdb.connect_sqlite(str(tmp_path / "orders.db"))
    outbox = Outbox()
    outbox.install(conn)
    with localdb.transaction(conn):
        outbox.put(conn, "order.placed", {"order_id": "o-1"}, message_id="evt-o-1")
    publisher = WorkflowPublisher(
        manager, lambda m: "fulfil" if m.topic == "order.placed" else None,
        key=lambda m: f"order-{m.payload['order_id']}",
    )  # fmt: skip
    async with manager:
        assert await Relay(outbox, conn, publisher).run_once() == 1
        assert await manager.get_workflow("order-o-1").result(timeout=30) == "fulfilled o-1"


# --------------------------------------------------------------------------- optional clients


def test_the_outbox_imports_without_broker_clients() -> None:
    code = (
        "import sys, sagaway.outbox, sagaway.toolkit.outbox; "
        "assert 'redis' not in sys.modules and 'nats' not in sys.modules, sorted(sys.modules)"
    )
    subprocess.run(
        [sys.executable, "-c", code],
        check=True, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )  # fmt: skip


def test_a_missing_client_names_the_extra_to_install() -> None:
    with pytest.raises(ImportError, match=r"pip install 'sagaway\[kafka\]'") as info:
        _optional.require("no_such_client_xyz", extra="kafka", package="kfk", what="KPublisher")
    assert "KPublisher needs the 'kfk' package" in str(info.value)


# --------------------------------------------------------------------------- real brokers


async def test_redis_stream_publisher_against_the_local_server() -> None:
    client = brokers.require_redis()
    from sagaway.toolkit.outbox import RedisStreamPublisher
    from sagaway.toolkit.outbox.redis_streams import decode_entry

    stream = f"sagaway-test-{uuid.uuid4().hex[:8]}"
    message = Message("m-1", "order.placed", {"order_id": "o-1", "lines": [1, 2]}, {"trace": "t1"},
                      created_at=1.5, sequence=7)  # fmt: skip
    try:
        async with RedisStreamPublisher(client, stream=stream) as publisher:
            await publisher.publish(message)
            await publisher.publish(message)  # Redis Streams do not de-duplicate
        entries = await client.xrange(stream)
        assert [decode_entry(fields) for _, fields in entries] == [message, message]
    finally:
        await client.delete(stream)
        await client.aclose()


async def test_jetstream_publisher_against_the_local_server() -> None:
    nc, js = await brokers.require_nats()
    from sagaway.toolkit.outbox import JetStreamPublisher
    from sagaway.toolkit.outbox.nats_jetstream import decode_message

    name = f"SAGAWAY_TEST_{uuid.uuid4().hex[:8].upper()}"
    subject = f"sagaway.test.{name.lower()}.orders"
    await js.add_stream(name=name, subjects=[f"sagaway.test.{name.lower()}.>"])
    try:
        message = Message("m-1", subject, {"order_id": "o-1"}, {"trace": "t1"})
        async with JetStreamPublisher() as publisher:
            await publisher.publish(message)
            await publisher.publish(message)  # within the duplicate window: stored once
            assert publisher.duplicates == 1
        # A subject no stream captures is an error, not a silent drop.
        async with JetStreamPublisher(timeout=2.0) as nowhere:
            with pytest.raises(brokers.nats_no_stream_error()):
                await nowhere.publish(Message("m-2", "sagaway.nowhere.captures.this", {}))
        info = await js.stream_info(name)
        assert info.state.messages == 1
        stored = decode_message(await js.get_msg(name, 1))
        assert stored.message_id == "m-1" and stored.payload == {"order_id": "o-1"}
        assert stored.headers == {"trace": "t1"} and stored.topic == subject
    finally:
        await js.delete_stream(name)
        await nc.close()
