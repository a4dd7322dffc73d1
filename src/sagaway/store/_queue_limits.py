"""Limits of activity queues shared by every process of a database (``Queue(scope="cluster")``).

State per queue: a ``queue_limits`` row (when the next start may come: starts are spaced
``1/rate`` apart, so no window of one second holds more than ``rate`` starts) and one
``queue_slots`` row per admitted attempt, with an expiry its holder pushes forward while the
attempt runs; a crashed holder's slot lapses at its expiry. A refused call is kept in line,
one ``queue_waiters`` row (its priority, since when, an expiry each ask pushes forward), and a
call is admitted only while no live waiter goes before it (a higher priority, or the same one
waiting longer). An admission reads the row, counts the live slots and the waiters ahead,
takes a slot and spaces the next start in one transaction: on PostgreSQL the queue's row is
locked (``FOR UPDATE``) for it, on SQLite the one writer serialises it.
"""

from __future__ import annotations

import abc
import dataclasses
from typing import Any

from sagaway.store._params import DEFAULT_PRIORITY
from sagaway.store.records import QueueAdmission
from sagaway.store.sql import queries

_SQ = queries("sqlite")


def waiting_for(queue: str) -> str:
    """What a workflow waiting for a slot or a start of ``queue`` is WAITING for."""
    return f"queue:{queue}"


def decide(
    next_start_at: float,
    taken: int,
    *,
    concurrency: int | None,
    rate: float | None,
    now: float,
    ahead: int = 0,
) -> tuple[float | None, float | None]:
    """``(retry_at, next_start_at)``: None and the next start's earliest time (unchanged if
    there is no rate) when an attempt may start now; else when to try again (``now`` when only
    a slot's release or the waiters ``ahead`` of it can let it in, which nobody can foresee)
    and None. The waiters ahead go first: the start a rate allows is for the first of them,
    free slots for as many."""
    if rate is not None and next_start_at > now:
        return next_start_at, None
    free = None if concurrency is None else concurrency - taken
    if free is not None and free <= 0:
        return now, None
    if ahead and (rate is not None or free is None or ahead >= free):
        return now, None
    return None, (now + 1.0 / rate if rate is not None else next_start_at)


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Slot:
    """``holder``'s slot of ``queue`` as of ``now`` (``expires_at``: until when it is asked for,
    by an admission or a renewal)."""

    queue: str
    holder: str
    now: float
    expires_at: float | None = None

    def params(self) -> dict[str, Any]:
        """The parameters of the slot statements (``holds_queue_slot``, ``take_queue_slot`` ...)."""
        return dataclasses.asdict(self)  # its fields are the statements' parameters

    def wake(self) -> dict[str, Any]:
        """``wake_queue_waiter``: the execution of this queue's first waiter, due now."""
        return {"queue": self.queue, "waiting_for": waiting_for(self.queue), "now": self.now}


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Waiter:
    """An activity call in line for ``queue`` (``queue_waiters``): ``since`` when it first
    asked (kept while it waits), ``expires_at`` when its row lapses unless it asks again."""

    queue: str
    run_id: str
    call_id: str
    priority: int
    now: float
    since: float
    expires_at: float

    def params(self) -> dict[str, Any]:
        """The parameters of the waiter statements (``waiters_ahead``, ``keep_waiter`` ...)."""
        return dataclasses.asdict(self)

    def kept(self, since: float | None, retry_at: float | None = None) -> Waiter:
        """This waiter as in line since ``since`` (None: from now on), its row lasting the
        lease time past ``retry_at`` (when it asks again), if later than now."""
        later = max((retry_at or self.now) - self.now, 0.0)
        return dataclasses.replace(
            self, since=self.now if since is None else since, expires_at=self.expires_at + later
        )


def waiter_of(admission: QueueAdmission, *, expires_at: float, now: float) -> Waiter | None:
    """The waiter ``admission`` is if refused (None: a call not kept in line, no ``run_id``)."""
    if not admission.run_id:
        return None
    return Waiter(
        queue=admission.queue,
        run_id=admission.run_id,
        call_id=admission.call_id,
        priority=admission.priority or DEFAULT_PRIORITY,
        now=now,
        since=now,
        expires_at=expires_at,
    )


class SQLQueueLimits(abc.ABC):
    """The queue limit verbs of both SQL stores: each makes its ``Slot`` and hands it to the
    dialect's hook (``_acquire``, ``_renew``, ``_release``), which runs the transaction."""

    @abc.abstractmethod
    async def _acquire(
        self, slot: Slot, waiter: Waiter | None, concurrency: int | None, rate: float | None
    ) -> float | None:
        """See ``Store.acquire_queue_slot``."""

    @abc.abstractmethod
    async def _renew(self, slot: Slot) -> bool:
        """See ``Store.renew_queue_slot``."""

    @abc.abstractmethod
    async def _release(self, slot: Slot) -> None:
        """See ``Store.release_queue_slot``."""

    @abc.abstractmethod
    async def _leave(self, slot: Slot, call: dict[str, Any]) -> None:
        """See ``Store.leave_queue`` (``call``: the ``drop_waiter`` parameters)."""

    async def acquire_queue_slot(
        self, admission: QueueAdmission, *, expires_at: float, now: float
    ) -> float | None:
        slot = Slot(queue=admission.queue, holder=admission.holder, now=now, expires_at=expires_at)
        waiter = waiter_of(admission, expires_at=expires_at, now=now)
        return await self._acquire(slot, waiter, admission.concurrency, admission.rate_per_second)

    async def renew_queue_slot(
        self, queue: str, *, holder: str, expires_at: float, now: float
    ) -> bool:
        return await self._renew(Slot(queue=queue, holder=holder, now=now, expires_at=expires_at))

    async def release_queue_slot(self, queue: str, *, holder: str, now: float) -> None:
        await self._release(Slot(queue=queue, holder=holder, now=now))

    async def leave_queue(self, queue: str, *, run_id: str, call_id: str, now: float) -> None:
        call = {"queue": queue, "run_id": run_id, "call_id": call_id}
        await self._leave(Slot(queue=queue, holder="", now=now), call)
