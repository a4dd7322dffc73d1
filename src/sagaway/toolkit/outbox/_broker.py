"""What the broker publishers (Redis Streams, NATS JetStream) share: where a message goes, and
their use as an async context manager that closes them at its end."""

from __future__ import annotations

import abc
from collections.abc import Callable
from typing import Self

from sagaway.toolkit.outbox._table import Message

Destination = str | Callable[[Message], str] | None
"""A stream or subject: one name, a function of the message, or None (the message's topic)."""


def destination(choice: Destination, message: Message) -> str:
    """The stream or subject ``message`` goes to under ``choice``."""
    if choice is None:
        return message.topic
    if isinstance(choice, str):
        return choice
    return choice(message)


class BrokerPublisher(abc.ABC):
    """``async with publisher:`` closes it at the end of the block (``aclose``)."""

    @abc.abstractmethod
    async def aclose(self) -> None:
        """Release what the publisher holds (its connection, a client it created)."""

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()
