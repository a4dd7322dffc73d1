"""The relay: publishes the outbox's pending messages, at least once, in the order written.

For each claimed message the relay publishes, then marks the row sent, committing after every
message. A relay that dies between the two (``kill -9``, a crash, a lost connection) leaves the
row unsent, and the next relay publishes it again: delivery is **at least once**, never at most
once. Consumers de-duplicate on ``message_id`` (:class:`sagaway.outbox.Inbox`, or a broker's
own de-duplication such as JetStream's ``Nats-Msg-Id``).

Claims carry a lease (``claim_timeout``) so that several relays can share an outbox without
publishing the same row at the same time, and a dead relay's rows are taken over when the lease
ends. A relay restarted under the same ``name`` takes its own claims back at once. Order holds
per relay: run one relay per outbox when consumers need the written order.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable
from typing import Protocol, runtime_checkable

from sagaway.clock import Clock
from sagaway.toolkit import localdb
from sagaway.toolkit.outbox._table import Message, Outbox

logger = logging.getLogger(__name__)


@runtime_checkable
class Publisher(Protocol):
    """Sends one message somewhere; returns once the destination has accepted it.

    Raising means "not published": the relay keeps the message and retries it later. A
    publisher may be called again for a message it already published (at-least-once).
    """

    async def publish(self, message: Message) -> None: ...


class CallbackPublisher:
    """A publisher that calls a function (sync or async) with each message: in-process delivery."""

    def __init__(self, fn: Callable[[Message], Awaitable[None] | None]) -> None:
        self._fn = fn

    async def publish(self, message: Message) -> None:
        result = self._fn(message)
        if inspect.isawaitable(result):
            await result


class Relay:
    """Publishes pending outbox messages through a publisher.

    Args:
        outbox: the table's helper (its clock times claims).
        conn: a connection to the service database used only by this relay; each relay step
            commits on it.
        publisher: where messages go.
        name: identifies this relay's claims; relays that run at the same time need distinct
            names, and a restarted relay should keep its name to take its claims back at once.
        batch_size: messages claimed at a time.
        claim_timeout: seconds a claim protects a message from other relays; longer than a
            batch takes to publish.
        poll_interval: seconds ``run`` waits when the outbox is empty (``wake()`` ends a wait).
        retry_interval: seconds before a message whose publish failed is tried again.
    """

    def __init__(
        self,
        outbox: Outbox,
        conn: localdb.Connection,
        publisher: Publisher,
        *,
        name: str = "relay",
        batch_size: int = 100,
        claim_timeout: float = 60.0,
        poll_interval: float = 1.0,
        retry_interval: float = 5.0,
    ) -> None:
        if batch_size < 1:
            raise ValueError("batch_size must be >= 1")
        for label, value in (
            ("claim_timeout", claim_timeout),
            ("poll_interval", poll_interval),
            ("retry_interval", retry_interval),
        ):
            if not value > 0:
                raise ValueError(f"{label} must be > 0 seconds, got {value!r}")
        if not isinstance(publisher, Publisher):
            raise TypeError("publisher must have an `async def publish(message)` method")
        localdb.dialect_of(conn)
        self.outbox = outbox
        self.conn = conn
        self.publisher = publisher
        self.name = name
        self.batch_size = batch_size
        self.claim_timeout = claim_timeout
        self.poll_interval = poll_interval
        self.retry_interval = retry_interval
        self.published = 0
        """Messages this relay has published (and marked sent) so far."""
        self._started = False
        self._wake = asyncio.Event()

    @property
    def clock(self) -> Clock:
        return self.outbox.clock

    def wake(self) -> None:
        """End ``run``'s wait at once (call it after committing a ``put``)."""
        self._wake.set()

    async def run_once(self) -> int:
        """Publish what is pending now, in order; returns how many were published.

        Raises the publisher's error after deferring the failed message and the rest of its
        batch by ``retry_interval`` (so order is kept).
        """
        if not self._started:
            # Claims held by this name belong to a previous incarnation that died.
            self.outbox.reclaim_own(self.conn, self.name)
            self._started = True
        done = 0
        while True:
            batch = self.outbox.claim(
                self.conn, owner=self.name, limit=self.batch_size, lease=self.claim_timeout
            )
            if not batch:
                return done
            for i, message in enumerate(batch):
                try:
                    await self.publisher.publish(message)
                except Exception as exc:
                    self.outbox.defer(
                        self.conn,
                        batch[i:],
                        owner=self.name,
                        delay=self.retry_interval,
                        error=f"{type(exc).__name__}: {exc}",
                    )
                    logger.warning(
                        "publishing outbox message %s failed (attempt %d): %s",
                        message.message_id,
                        message.attempts,
                        exc,
                        extra={"action": "outbox_publish_failed", "message_id": message.message_id},
                    )
                    raise
                # The at-least-once window: published, not yet marked sent.
                self.outbox.mark_sent(self.conn, message)
                self.published += 1
                done += 1
            if len(batch) < self.batch_size:
                return done

    async def run(self, stop: asyncio.Event | None = None) -> None:
        """Publish until ``stop`` is set: forever, waiting ``poll_interval`` when idle.

        A failed publish is logged and retried after ``retry_interval``; nothing is dropped.
        """
        stop = stop or asyncio.Event()
        while not stop.is_set():
            self._wake.clear()
            try:
                await self.run_once()
                delay = self.poll_interval
            except Exception:
                logger.exception("outbox relay %s: publish failed; retrying", self.name)
                delay = self.retry_interval
            await _wait_any(stop, self._wake, self.clock, delay)


async def _wait_any(stop: asyncio.Event, wake: asyncio.Event, clock: Clock, delay: float) -> None:
    waiters = {
        asyncio.ensure_future(stop.wait()),
        asyncio.ensure_future(wake.wait()),
        asyncio.ensure_future(clock.sleep(delay)),
    }
    try:
        await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()
