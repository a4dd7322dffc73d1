"""The outbox and inbox tables of a service's own database.

The **outbox** holds messages written in the same local transaction as the business update
(Transactional Outbox): either both commit or neither does, so a committed update always gets
its message out and no message announces an update that rolled back. A relay
(:class:`sagaway.outbox.Relay`) publishes the pending rows later, at least once.

The **inbox** is the consumer's half: a message id is recorded in the same transaction as the
message's effect, so a redelivery (the relay died after publishing and before marking the row
sent) finds the id and does nothing.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable, Mapping
from typing import Any, LiteralString, TypeVar

import pydantic_core

from sagaway import serialization
from sagaway.clock import Clock, SystemClock
from sagaway.toolkit import _tables, localdb

T = TypeVar("T")
_SQLITE, _PG = localdb.Dialect.SQLITE, localdb.Dialect.POSTGRES

_OUTBOX_SCHEMA: dict[localdb.Dialect, tuple[LiteralString, ...]] = {
    _SQLITE: (
        "CREATE TABLE IF NOT EXISTS sagaway_outbox ("
        " id INTEGER PRIMARY KEY AUTOINCREMENT,"
        " message_id TEXT NOT NULL UNIQUE,"
        " topic TEXT NOT NULL,"
        " payload TEXT NOT NULL,"
        " headers TEXT NOT NULL,"
        " created_at REAL NOT NULL,"
        " attempts INTEGER NOT NULL DEFAULT 0,"
        " claimed_by TEXT,"
        " claimed_until REAL,"
        " sent_at REAL,"
        " last_error TEXT)",
        "CREATE INDEX IF NOT EXISTS sagaway_outbox_pending ON sagaway_outbox (id)"
        " WHERE sent_at IS NULL",
    ),
    _PG: (
        "CREATE TABLE IF NOT EXISTS sagaway_outbox ("
        " id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,"
        " message_id TEXT NOT NULL UNIQUE,"
        " topic TEXT NOT NULL,"
        " payload TEXT NOT NULL,"
        " headers TEXT NOT NULL,"
        " created_at DOUBLE PRECISION NOT NULL,"
        " attempts INTEGER NOT NULL DEFAULT 0,"
        " claimed_by TEXT,"
        " claimed_until DOUBLE PRECISION,"
        " sent_at DOUBLE PRECISION,"
        " last_error TEXT)",
        "CREATE INDEX IF NOT EXISTS sagaway_outbox_pending ON sagaway_outbox (id)"
        " WHERE sent_at IS NULL",
    ),
}
_PUT = _tables.both(
    "INSERT INTO sagaway_outbox (message_id, topic, payload, headers, created_at)"
    " VALUES (?, ?, ?, ?, ?) ON CONFLICT (message_id) DO NOTHING"
)
# Claim the oldest claimable rows for one relay, with a lease: a relay that dies holding them
# loses them when the lease ends (or at once, when it restarts under the same name).
_CLAIM: dict[localdb.Dialect, LiteralString] = {
    _SQLITE: (
        "UPDATE sagaway_outbox SET claimed_by = ?, claimed_until = ?, attempts = attempts + 1"
        " WHERE id IN (SELECT id FROM sagaway_outbox WHERE sent_at IS NULL"
        "  AND (claimed_until IS NULL OR claimed_until <= ?) ORDER BY id LIMIT ?)"
        " RETURNING id, message_id, topic, payload, headers, created_at, attempts"
    ),
    _PG: (
        "UPDATE sagaway_outbox SET claimed_by = %s, claimed_until = %s, attempts = attempts + 1"
        " WHERE id IN (SELECT id FROM sagaway_outbox WHERE sent_at IS NULL"
        "  AND (claimed_until IS NULL OR claimed_until <= %s) ORDER BY id LIMIT %s"
        "  FOR UPDATE SKIP LOCKED)"
        " RETURNING id, message_id, topic, payload, headers, created_at, attempts"
    ),
}
_MARK_SENT = _tables.both(
    "UPDATE sagaway_outbox SET sent_at = ?, claimed_until = NULL, last_error = NULL"
    " WHERE id = ? AND sent_at IS NULL"
)
_DEFER = _tables.both(
    "UPDATE sagaway_outbox SET claimed_until = ?, last_error = COALESCE(?, last_error)"
    " WHERE id = ? AND claimed_by = ? AND sent_at IS NULL"
)
_RECLAIM_OWN = _tables.both(
    "UPDATE sagaway_outbox SET claimed_until = NULL"
    " WHERE claimed_by = ? AND sent_at IS NULL AND claimed_until IS NOT NULL"
)
_PENDING = _tables.both("SELECT count(*) FROM sagaway_outbox WHERE sent_at IS NULL")
_PURGE_SENT = _tables.both("DELETE FROM sagaway_outbox WHERE sent_at IS NOT NULL AND sent_at <= ?")

_INBOX_SCHEMA: dict[localdb.Dialect, tuple[LiteralString, ...]] = {
    _SQLITE: (
        "CREATE TABLE IF NOT EXISTS sagaway_inbox ("
        " consumer TEXT NOT NULL,"
        " message_id TEXT NOT NULL,"
        " received_at REAL NOT NULL,"
        " PRIMARY KEY (consumer, message_id))",
        "CREATE INDEX IF NOT EXISTS sagaway_inbox_received ON sagaway_inbox (received_at)",
    ),
    _PG: (
        "CREATE TABLE IF NOT EXISTS sagaway_inbox ("
        " consumer TEXT NOT NULL,"
        " message_id TEXT NOT NULL,"
        " received_at DOUBLE PRECISION NOT NULL,"
        " PRIMARY KEY (consumer, message_id))",
        "CREATE INDEX IF NOT EXISTS sagaway_inbox_received ON sagaway_inbox (received_at)",
    ),
}
_ACCEPT = _tables.both(
    "INSERT INTO sagaway_inbox (consumer, message_id, received_at) VALUES (?, ?, ?)"
    " ON CONFLICT (consumer, message_id) DO NOTHING"
)
_SEEN = _tables.both("SELECT 1 FROM sagaway_inbox WHERE consumer = ? AND message_id = ?")
_INBOX_PURGE = _tables.both("DELETE FROM sagaway_inbox WHERE consumer = ? AND received_at <= ?")


@dataclasses.dataclass(frozen=True, slots=True)
class Message:
    """A message as written to the outbox and handed to a publisher."""

    message_id: str
    """Unique id; consumers de-duplicate on it (the relay may deliver a message twice)."""
    topic: str
    """Where it goes: a stream, subject or workflow route, by the publisher's rules."""
    payload: Any
    """The JSON value written (decoded)."""
    headers: dict[str, str] = dataclasses.field(default_factory=dict)
    created_at: float = 0.0
    """When it was written (the outbox's clock)."""
    sequence: int = 0
    """Outbox row id: increases in the order messages were written."""
    attempts: int = 0
    """Publish attempts so far, the current one included."""

    def payload_json(self) -> str:
        """The payload as JSON text."""
        return pydantic_core.to_json(self.payload).decode()


def _dialect(conn: localdb.Connection) -> localdb.Dialect:
    return localdb.dialect_of(conn)


def _rowcount(cursor: Any) -> int:
    count = getattr(cursor, "rowcount", -1)
    return int(count) if count is not None and count >= 0 else 0


class Outbox:
    """The ``sagaway_outbox`` table of a service's database.

    Args:
        clock: time source for ``created_at`` and claim leases (a FakeClock in tests).
    """

    def __init__(self, *, clock: Clock | None = None) -> None:
        self.clock: Clock = clock or SystemClock()

    def install(self, conn: localdb.Connection) -> None:
        """Create the table if it does not exist (idempotent; commits)."""
        _tables.install(conn, _OUTBOX_SCHEMA)

    def put(
        self,
        conn: localdb.Connection,
        topic: str,
        payload: Any,
        *,
        message_id: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> str:
        """Write a message in the caller's transaction (no commit); returns its id.

        Call it in the same transaction as the business update it announces. ``message_id``
        defaults to a new UUID; pass one derived from the request (e.g. the activity's
        idempotency key) so that a retried request writes the message once: a second ``put``
        with the same id is ignored.

        Raises:
            RuntimeError: the connection is in autocommit mode with no transaction open (the
                message would commit apart from the update).
            PayloadError: the payload is not JSON-serialisable.
        """
        if not topic:
            raise ValueError("a message needs a topic")
        dialect = _dialect(conn)
        localdb.require_transaction_or_implicit(conn, "Outbox.put")
        mid = message_id or uuid.uuid4().hex
        body = serialization.encode_value(payload, f"payload of outbox message {mid!r}")
        head = pydantic_core.to_json(dict(headers or {})).decode()
        conn.execute(_PUT[dialect], (mid, topic, body, head, self.clock.now()))
        return mid

    def pending_count(self, conn: localdb.Connection) -> int:
        """Messages not yet marked sent."""
        row = conn.execute(_PENDING[_dialect(conn)]).fetchone()
        return int(row[0]) if row else 0

    # -- used by the relay: each call is its own short transaction ---------------------------

    def claim(
        self, conn: localdb.Connection, *, owner: str, limit: int, lease: float
    ) -> list[Message]:
        """Claim up to ``limit`` unsent messages for ``owner`` for ``lease`` seconds (commits)."""
        dialect = _dialect(conn)
        now = self.clock.now()
        with localdb.transaction(conn):
            rows = conn.execute(_CLAIM[dialect], (owner, now + lease, now, limit)).fetchall()
        messages = [
            Message(
                message_id=row[1],
                topic=row[2],
                payload=pydantic_core.from_json(row[3]),
                headers=dict(pydantic_core.from_json(row[4])),
                created_at=float(row[5]),
                sequence=int(row[0]),
                attempts=int(row[6]),
            )
            for row in rows
        ]
        # RETURNING does not promise an order; publish in the order messages were written.
        return sorted(messages, key=lambda m: m.sequence)

    def mark_sent(self, conn: localdb.Connection, message: Message) -> None:
        """Record that ``message`` was published (commits)."""
        with localdb.transaction(conn):
            conn.execute(_MARK_SENT[_dialect(conn)], (self.clock.now(), message.sequence))

    def defer(
        self,
        conn: localdb.Connection,
        messages: list[Message],
        *,
        owner: str,
        delay: float,
        error: str | None = None,
    ) -> None:
        """Keep ``messages`` claimed but unpublished for ``delay`` seconds (commits).

        ``error`` is recorded on the first of them (the one whose publish failed).
        """
        if not messages:
            return
        dialect = _dialect(conn)
        until = self.clock.now() + delay
        with localdb.transaction(conn):
            for i, message in enumerate(messages):
                conn.execute(
                    _DEFER[dialect], (until, error if i == 0 else None, message.sequence, owner)
                )

    def reclaim_own(self, conn: localdb.Connection, owner: str) -> int:
        """Free the claims ``owner`` holds (a relay restarted under the same name; commits)."""
        with localdb.transaction(conn):
            return _rowcount(conn.execute(_RECLAIM_OWN[_dialect(conn)], (owner,)))

    def purge_sent(self, conn: localdb.Connection, *, older_than: float) -> int:
        """Delete messages sent more than ``older_than`` seconds ago (commits)."""
        with localdb.transaction(conn):
            cursor = conn.execute(_PURGE_SENT[_dialect(conn)], (self.clock.now() - older_than,))
            return _rowcount(cursor)


class Inbox:
    """The ``sagaway_inbox`` table: message ids a consumer has processed.

    Args:
        consumer: name of the consuming handler; each consumer de-duplicates on its own, so two
            handlers of one message in one database both run.
        clock: time source for ``received_at``.
    """

    def __init__(self, consumer: str = "default", *, clock: Clock | None = None) -> None:
        if not consumer:
            raise ValueError("an inbox needs a consumer name")
        self.consumer = consumer
        self.clock: Clock = clock or SystemClock()

    def install(self, conn: localdb.Connection) -> None:
        """Create the table if it does not exist (idempotent; commits)."""
        _tables.install(conn, _INBOX_SCHEMA)

    def accept(self, conn: localdb.Connection, message_id: str) -> bool:
        """Record ``message_id`` in the caller's transaction; False if it was already there.

        Process the message only when this returns True, in the same transaction. A concurrent
        duplicate waits for the first transaction (its insert of the same id blocks) and then
        gets False.
        """
        dialect = _dialect(conn)
        localdb.require_transaction_or_implicit(conn, "Inbox.accept")
        cursor = conn.execute(_ACCEPT[dialect], (self.consumer, message_id, self.clock.now()))
        return _rowcount(cursor) == 1

    def seen(self, conn: localdb.Connection, message_id: str) -> bool:
        """Whether ``message_id`` was processed (and committed, or is in this transaction)."""
        row = conn.execute(_SEEN[_dialect(conn)], (self.consumer, message_id)).fetchone()
        return row is not None

    def process(
        self, conn: localdb.Connection, message_id: str, handler: Callable[[], T]
    ) -> tuple[bool, T | None]:
        """Run ``handler()`` once per message id, in one transaction with the inbox row.

        Returns ``(True, result)`` when the handler ran, ``(False, None)`` for a duplicate.
        The transaction is the caller's if one is open (a savepoint), else a new one.
        """
        with localdb.transaction(conn):
            if not self.accept(conn, message_id):
                return False, None
            return True, handler()

    def purge(self, conn: localdb.Connection, *, older_than: float) -> int:
        """Forget ids received more than ``older_than`` seconds ago (commits).

        Keep them longer than any redelivery can take (relay claim lease + broker retention).
        """
        with localdb.transaction(conn):
            cursor = conn.execute(
                _INBOX_PURGE[_dialect(conn)], (self.consumer, self.clock.now() - older_than)
            )
            return _rowcount(cursor)
