"""Publish outbox messages to NATS JetStream (extra ``sagaway[nats]``).

Each message is published to a subject (default: its topic) with the payload as JSON bytes and
the header ``Nats-Msg-Id: <message_id>``. JetStream keeps the ids it stored within the stream's
duplicate window (two minutes by default) and acknowledges a repeated id without storing it
again: a relay that re-publishes after a crash produces one stream message, not two. Outside
the window a duplicate is stored, so consumers still de-duplicate with
:class:`sagaway.outbox.Inbox`.

The publisher waits for JetStream's acknowledgement (the message is persisted in a stream)
before the relay marks the row sent; a subject that no stream captures is an error, not a
silent drop.
"""

from __future__ import annotations

from typing import Any

import pydantic_core

from sagaway.toolkit.outbox import _optional
from sagaway.toolkit.outbox._broker import BrokerPublisher, Destination, destination
from sagaway.toolkit.outbox._table import Message

MESSAGE_ID_HEADER = "Nats-Msg-Id"
TOPIC_HEADER = "Sagaway-Topic"


def decode_message(msg: Any) -> Message:
    """The :class:`~sagaway.outbox.Message` of a JetStream message published by us."""
    headers = dict(msg.headers or {})
    message_id = headers.pop(MESSAGE_ID_HEADER, None)
    if message_id is None:
        raise ValueError(f"message on {msg.subject!r} has no {MESSAGE_ID_HEADER} header")
    topic = headers.pop(TOPIC_HEADER, msg.subject)
    return Message(
        message_id=message_id,
        topic=topic,
        payload=pydantic_core.from_json(msg.data) if msg.data else None,
        headers=headers,
    )


class JetStreamPublisher(BrokerPublisher):
    """Publishes each message to a JetStream subject and waits for the stream's ack.

    Args:
        servers: NATS server URL(s).
        subject: subject, or a function of the message; default: the message's topic.
        timeout: seconds to wait for the acknowledgement.
        connect_options: passed to ``nats.connect``.
    """

    def __init__(
        self,
        servers: str | list[str] = "nats://127.0.0.1:4222",
        *,
        subject: Destination = None,
        timeout: float = 5.0,
        **connect_options: Any,
    ) -> None:
        self._nats = _optional.require(
            "nats", extra="nats", package="nats-py", what="JetStreamPublisher"
        )
        self._servers = servers
        self._subject = subject
        self._timeout = timeout
        self._options = connect_options
        self._nc: Any = None
        self._js: Any = None
        self.duplicates = 0
        """Publishes JetStream acknowledged as duplicates (already stored within the window)."""

    def subject_for(self, message: Message) -> str:
        return destination(self._subject, message)

    async def connect(self) -> None:
        """Connect now (``publish`` connects on first use otherwise)."""
        if self._nc is None:
            self._nc = await self._nats.connect(self._servers, **self._options)
            self._js = self._nc.jetstream()

    @property
    def jetstream(self) -> Any:
        """The ``nats.js.JetStreamContext`` in use (after ``connect``)."""
        return self._js

    async def publish(self, message: Message) -> None:
        """Publish and wait for the stream's acknowledgement."""
        await self.connect()
        headers = {**message.headers, MESSAGE_ID_HEADER: message.message_id}
        headers[TOPIC_HEADER] = message.topic
        ack = await self._js.publish(
            self.subject_for(message),
            message.payload_json().encode(),
            timeout=self._timeout,
            headers=headers,
        )
        if getattr(ack, "duplicate", False):
            self.duplicates += 1

    async def aclose(self) -> None:
        if self._nc is not None:
            await self._nc.close()
            self._nc = self._js = None

    async def __aenter__(self) -> JetStreamPublisher:
        await self.connect()
        return self
