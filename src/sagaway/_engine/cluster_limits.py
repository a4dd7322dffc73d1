"""Cluster-wide activity queue limits (``Queue(scope="cluster")``), as an execution meets them.

Before each attempt of an activity of such a queue, the execution asks the store for a slot
and a start (``Store.acquire_queue_slot``). Admitted, the attempt holds the slot while it runs
(its expiry renewed every third of the lease timeout, so a crashed process's slot lapses as its
lease does) and gives it back when it ends, making the workflow that has waited longest for a
slot due at once. Refused, nothing is recorded and the attempt number
does not move: if the call is all the workflow is doing, the workflow is unloaded like a durable
timer (WAITING until the expected start, or a short poll for a slot, with no lease held) and the
replay after recovery reaches the call again; beside other work (a gather) it waits in the
worker, its worker slot given back, and unloads once it is alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import random
from collections.abc import AsyncIterator, Callable

from sagaway.clock import Clock
from sagaway.registry import Queue
from sagaway.store.base import Store
from sagaway.store.records import QueueAdmission

logger = logging.getLogger(__name__)

SLOT_POLL = (0.1, 0.3)
"""Seconds (a random pick, so waiters do not all come back at once) before a workflow refused
for want of a slot looks again: a slot's release cannot be foreseen."""


@dataclasses.dataclass(eq=False)
class ClusterLimit:
    """The shared limits of one activity queue, kept in the database."""

    name: str
    queue: Queue
    store: Store
    clock: Clock
    lease_timeout: float
    wake: Callable[[], None]
    """Makes this process's Recovery Worker look now (a release made a waiter due)."""

    async def admit(self, holder: str, waiter: tuple[str, str, int]) -> float | None:
        """None if an attempt of ``holder`` may start now (a slot is held for it); else the
        time to try again (never now). ``waiter``: the call's run id, call id and priority,
        its place in the queue's line while refused."""
        now = self.clock.now()
        run_id, call_id, priority = waiter
        try:
            retry_at = await self.store.acquire_queue_slot(
                QueueAdmission(
                    queue=self.name,
                    holder=holder,
                    concurrency=self.queue.concurrency,
                    rate_per_second=self.queue.rate_per_second,
                    priority=priority,
                    run_id=run_id,
                    call_id=call_id,
                ),
                expires_at=now + self.lease_timeout,
                now=now,
            )
        except BaseException:
            # Interrupted (its task cancelled: the run was terminated, cancelled or lost its
            # lease; or the answer was lost), the admission may still have committed. Nobody
            # holds or renews that slot, and the holder is never asked for again: given back
            # now, it does not keep the queue full for a whole lease_timeout.
            await self._give_back(holder)
            raise
        if retry_at is None or retry_at > now:
            return retry_at
        return now + random.uniform(*SLOT_POLL)

    async def leave(self, run_id: str, call_id: str) -> None:
        """Take a call that stopped waiting (cancelled) out of the queue's line; else its
        place lapses at its expiry."""
        try:
            await asyncio.shield(
                self.store.leave_queue(
                    self.name, run_id=run_id, call_id=call_id, now=self.clock.now()
                )
            )
        except Exception as exc:
            logger.warning("could not leave the line of queue %s: %s", self.name, exc)
        else:
            self.wake()

    @contextlib.asynccontextmanager
    async def holding(self, holder: str) -> AsyncIterator[None]:
        """While the attempt runs: renew its slot; afterwards give it back."""
        renewer = asyncio.create_task(self._renew(holder), name=f"sagaway-slot-{self.name}")
        try:
            yield
        finally:
            renewer.cancel()
            await self._give_back(holder)

    async def _give_back(self, holder: str) -> None:
        """Release ``holder``'s slot, if it has one; it runs to its end even if the caller is
        cancelled meanwhile."""
        try:
            await asyncio.shield(
                self.store.release_queue_slot(self.name, holder=holder, now=self.clock.now())
            )
        except Exception as exc:  # the slot lapses at its expiry instead
            logger.warning("could not release a slot of queue %s: %s", self.name, exc)
        else:
            self.wake()

    async def _renew(self, holder: str) -> None:
        while True:
            await self.clock.sleep(self.lease_timeout / 3)
            now = self.clock.now()
            try:
                await self.store.renew_queue_slot(
                    self.name, holder=holder, expires_at=now + self.lease_timeout, now=now
                )
            except Exception as exc:  # tried again at the next beat
                logger.warning("could not renew a slot of queue %s: %s", self.name, exc)
