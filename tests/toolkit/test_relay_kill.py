"""kill -9 of an outbox relay between publishing a message and marking it sent.

The relay runs as its own process against a real broker (Redis Streams, NATS JetStream) and a
real outbox (SQLite, PostgreSQL). It announces ``PUBLISHED <id>`` from inside the publisher,
after the broker accepted the message and before the row is marked sent, and blocks there: the
test kills it exactly at that point (explicit synchronisation, no sleeps). A new relay process
then publishes the message again with the rest. On the consumer's side the inbox drops the
duplicate: every message is applied exactly once, and none is lost.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from sagaway.toolkit import localdb
from sagaway.toolkit.outbox import Inbox, Message, Outbox
from tests.toolkit import brokers
from tests.toolkit.conftest import ServiceDB

pytestmark = [pytest.mark.slow, pytest.mark.long]

APP = Path(__file__).with_name("relay_app.py")
ROOT = Path(__file__).resolve().parents[2]
MESSAGES = 5
VICTIM = "placed-o-2"  # the third message: two batches of two, killed in the second


def _spawn(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(APP), *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), *sys.path])},
    )  # fmt: skip


def _fill_outbox(db: ServiceDB, topic: str) -> None:
    conn = db.connect()
    outbox = Outbox()
    outbox.install(conn)
    with localdb.transaction(conn):
        conn.execute("CREATE TABLE orders (id TEXT PRIMARY KEY)")
    for i in range(MESSAGES):
        with localdb.transaction(conn):  # the business update and its message, together
            conn.execute(f"INSERT INTO orders (id) VALUES ({db.param})", (f"o-{i}",))
            outbox.put(conn, topic, {"order_id": f"o-{i}"}, message_id=f"placed-o-{i}")


def _outbox_state(db: ServiceDB) -> dict[str, bool]:
    conn = db.connect()
    rows = conn.execute("SELECT message_id, sent_at IS NOT NULL FROM sagaway_outbox").fetchall()
    return {str(mid): bool(sent) for mid, sent in rows}


def _kill_at_publish_then_restart(db: ServiceDB, broker: str, target: str) -> tuple[int, int]:
    victim = _spawn(db.url, broker, target, f"stop-after:{VICTIM}")
    assert victim.stdout is not None
    line = victim.stdout.readline()  # blocks until the victim is parked at the boundary
    assert line.strip() == f"PUBLISHED {VICTIM}", (line, victim.stderr and victim.stderr.read())
    victim.send_signal(signal.SIGKILL)
    victim.communicate(timeout=30)
    assert victim.returncode == -signal.SIGKILL
    state = _outbox_state(db)
    assert state == {
        "placed-o-0": True, "placed-o-1": True,  # first batch: published and marked
        VICTIM: False,  # published, but the mark never committed
        "placed-o-3": False, "placed-o-4": False,
    }  # fmt: skip
    restarted = _spawn(db.url, broker, target, "drain")
    out, err = restarted.communicate(timeout=60)
    assert restarted.returncode == 0, err
    _, published, duplicates = out.split()
    assert all(_outbox_state(db).values())
    return int(published), int(duplicates)


def _consume(db: ServiceDB, messages: list[Message]) -> list[bool]:
    """The consumer: apply each delivery through the inbox; True where it was applied."""
    conn = db.connect()
    inbox = Inbox("fulfilment")
    inbox.install(conn)
    with localdb.transaction(conn):
        conn.execute("CREATE TABLE applied (order_id TEXT, message_id TEXT)")
    outcomes = []
    for m in messages:
        done, _ = inbox.process(
            conn,
            m.message_id,
            lambda m=m: conn.execute(  # type: ignore[misc]
                f"INSERT INTO applied VALUES ({db.param}, {db.param})",
                (m.payload["order_id"], m.message_id),
            ),
        )
        outcomes.append(done)
    rows = conn.execute("SELECT order_id, count(*) FROM applied GROUP BY order_id").fetchall()
    assert {str(o): int(n) for o, n in rows} == {f"o-{i}": 1 for i in range(MESSAGES)}
    return outcomes


async def test_redis_relay_killed_after_publish_redelivers_and_the_inbox_dedupes(
    service_db: ServiceDB,
) -> None:
    client = brokers.require_redis()
    from sagaway.toolkit.outbox.redis_streams import decode_entry

    stream = f"sagaway-kill-{uuid.uuid4().hex[:8]}"
    _fill_outbox(service_db, "order.placed")
    try:
        published, _ = _kill_at_publish_then_restart(service_db, "redis", stream)
        assert published == 3  # the victim again, then the two never published
        delivered = [decode_entry(fields) for _, fields in await client.xrange(stream)]
    finally:
        await client.delete(stream)
        await client.aclose()
    ids = [m.message_id for m in delivered]
    assert ids == ["placed-o-0", "placed-o-1", VICTIM, VICTIM, "placed-o-3", "placed-o-4"]
    assert _consume(service_db, delivered) == [True, True, True, False, True, True]


async def test_nats_relay_killed_after_publish_is_deduplicated_by_jetstream(
    service_db: ServiceDB,
) -> None:
    nc, js = await brokers.require_nats()
    from sagaway.toolkit.outbox.nats_jetstream import decode_message

    name = f"SAGAWAY_KILL_{uuid.uuid4().hex[:8].upper()}"
    topic = f"sagaway.kill.{name.lower()}.orders"
    await js.add_stream(name=name, subjects=[f"sagaway.kill.{name.lower()}.>"])
    _fill_outbox(service_db, topic)
    try:
        published, duplicates = _kill_at_publish_then_restart(service_db, "nats", "")
        # The relay really sent the victim again; JetStream acknowledged it as a duplicate
        # (same Nats-Msg-Id within the duplicate window) and stored it once.
        assert (published, duplicates) == (3, 1)
        count = (await js.stream_info(name)).state.messages
        delivered: list[Any] = [
            decode_message(await js.get_msg(name, i)) for i in range(1, count + 1)
        ]
    finally:
        await js.delete_stream(name)
        await nc.close()
    assert [m.message_id for m in delivered] == [f"placed-o-{i}" for i in range(MESSAGES)]
    # Past the duplicate window JetStream would store it twice: the inbox is still the guard.
    assert _consume(service_db, [*delivered, delivered[2]]) == [True] * MESSAGES + [False]
