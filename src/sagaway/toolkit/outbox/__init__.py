"""Transactional outbox, relay and inbox for a service's own database.

Write a message in the same local transaction as the business update
(:meth:`Outbox.put`), let a :class:`Relay` publish pending messages at least once, and
de-duplicate on the consumer's side with an :class:`Inbox`::

    outbox = Outbox()
    with localdb.transaction(conn):
        conn.execute("UPDATE orders SET status = 'PLACED' WHERE id = ?", (order_id,))
        outbox.put(conn, "order.placed", {"order_id": order_id}, message_id=f"placed-{order_id}")

    async with RedisStreamPublisher("redis://127.0.0.1:6379") as redis_out:
        await Relay(outbox, relay_conn, redis_out).run(stop)

Publishers: :class:`RedisStreamPublisher` (Redis Streams, extra ``sagaway[redis]``),
:class:`JetStreamPublisher` (NATS JetStream, extra ``sagaway[nats]``),
:class:`WorkflowPublisher` (starts Sagaway workflows by name, the message id as idempotency key)
and :class:`CallbackPublisher` (in-process). Broker clients are imported when a publisher is
created, so this package imports without them.
"""

from __future__ import annotations

from sagaway.toolkit.outbox._table import Inbox, Message, Outbox
from sagaway.toolkit.outbox.nats_jetstream import JetStreamPublisher
from sagaway.toolkit.outbox.redis_streams import RedisStreamPublisher
from sagaway.toolkit.outbox.relay import CallbackPublisher, Publisher, Relay
from sagaway.toolkit.outbox.workflows import UnroutableMessage, WorkflowPublisher

__all__ = [
    "CallbackPublisher",
    "Inbox",
    "JetStreamPublisher",
    "Message",
    "Outbox",
    "Publisher",
    "Relay",
    "RedisStreamPublisher",
    "UnroutableMessage",
    "WorkflowPublisher",
]
