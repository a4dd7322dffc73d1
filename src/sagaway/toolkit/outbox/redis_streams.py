"""Publish outbox messages to Redis Streams (extra ``sagaway[redis]``).

Each message becomes one stream entry (``XADD``) whose fields are ``message_id``, ``topic``,
``payload`` (JSON), ``headers`` (JSON), ``created_at`` and ``sequence``. Redis Streams do not
de-duplicate: a message the relay publishes twice is two entries, so consumers de-duplicate on
``message_id`` with :class:`sagaway.outbox.Inbox`. :func:`decode_entry` turns an entry's fields
back into a :class:`~sagaway.outbox.Message`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pydantic_core

from sagaway.toolkit.outbox import _optional
from sagaway.toolkit.outbox._broker import BrokerPublisher, Destination, destination
from sagaway.toolkit.outbox._table import Message


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def encode_entry(message: Message) -> dict[str, str]:
    """The stream entry fields of ``message``."""
    return {
        "message_id": message.message_id,
        "topic": message.topic,
        "payload": message.payload_json(),
        "headers": pydantic_core.to_json(message.headers).decode(),
        "created_at": repr(message.created_at),
        "sequence": str(message.sequence),
    }


def decode_entry(fields: Mapping[bytes, bytes] | Mapping[str, str]) -> Message:
    """The message of a stream entry written by :class:`RedisStreamPublisher`."""
    data = {_text(k): _text(v) for k, v in fields.items()}
    try:
        return Message(
            message_id=data["message_id"],
            topic=data["topic"],
            payload=pydantic_core.from_json(data["payload"]),
            headers=dict(pydantic_core.from_json(data.get("headers", "{}"))),
            created_at=float(data.get("created_at", "0")),
            sequence=int(data.get("sequence", "0")),
        )
    except (KeyError, ValueError) as exc:
        raise ValueError(f"not a stream entry written by RedisStreamPublisher: {exc}") from None


class RedisStreamPublisher(BrokerPublisher):
    """Publishes each message with ``XADD`` to a Redis stream.

    Args:
        client: a ``redis://`` URL, or a ``redis.asyncio.Redis`` client (not closed by us).
        stream: stream name, or a function of the message; default: the message's topic.
        maxlen: trim the stream to about this many entries (``XADD MAXLEN ~``); None: no trim.
    """

    def __init__(
        self,
        client: str | Any = "redis://127.0.0.1:6379/0",
        *,
        stream: Destination = None,
        maxlen: int | None = None,
    ) -> None:
        redis_asyncio = _optional.require(
            "redis.asyncio", extra="redis", package="redis", what="RedisStreamPublisher"
        )
        if isinstance(client, str):
            self._client: Any = redis_asyncio.Redis.from_url(client)
            self._owns_client = True
        else:
            self._client = client
            self._owns_client = False
        self._stream = stream
        self._maxlen = maxlen

    def stream_for(self, message: Message) -> str:
        """The stream ``message`` goes to."""
        return destination(self._stream, message)

    async def publish(self, message: Message) -> None:
        """``XADD`` the message; returns once Redis has stored the entry."""
        await self._client.xadd(
            self.stream_for(message),
            encode_entry(message),
            maxlen=self._maxlen,
            approximate=True,
        )

    async def aclose(self) -> None:
        """Close the client if this publisher created it."""
        if self._owns_client:
            await self._client.aclose()
