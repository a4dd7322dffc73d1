"""An outbox relay as its own process, for the kill -9 tests.

    python relay_app.py OUTBOX BROKER TARGET MODE

OUTBOX: a service database (a SQLite path, or ``<postgres url>#<schema>``).
BROKER: ``redis`` (TARGET: the stream) or ``nats`` (TARGET: ignored; subjects are topics).
MODE: ``stop-after:<message id>``: publish until that message is published, then print
``PUBLISHED <id>`` and block before marking it sent, so the test can kill -9 the process
exactly there; or ``drain``: publish everything pending and print ``DRAINED <n> <duplicates>``.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from sagaway.toolkit.outbox import JetStreamPublisher, Message, Outbox, RedisStreamPublisher, Relay
from tests.toolkit.brokers import NATS_URL, REDIS_URL
from tests.toolkit.conftest import connect


class StopAfter:
    """Publishes through ``inner``; after publishing ``message_id``, parks until killed."""

    def __init__(self, inner: Any, message_id: str) -> None:
        self.inner = inner
        self.message_id = message_id

    async def publish(self, message: Message) -> None:
        await self.inner.publish(message)
        if message.message_id == self.message_id:
            print(f"PUBLISHED {message.message_id}", flush=True)
            await asyncio.Event().wait()  # between publish and mark-as-sent, until SIGKILL


async def main(outbox_url: str, broker: str, target: str, mode: str) -> None:
    if broker == "redis":
        publisher: Any = RedisStreamPublisher(REDIS_URL, stream=target)
    else:
        publisher = JetStreamPublisher(NATS_URL)
    async with publisher:
        relay_publisher = publisher
        if mode.startswith("stop-after:"):
            relay_publisher = StopAfter(publisher, mode.split(":", 1)[1])
        # The same relay name in both processes: the restarted relay takes its claims back.
        relay = Relay(Outbox(), connect(outbox_url), relay_publisher, name="relay-1", batch_size=2)
        published = await relay.run_once()
        duplicates = getattr(publisher, "duplicates", 0)
        print(f"DRAINED {published} {duplicates}", flush=True)


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:5]))
