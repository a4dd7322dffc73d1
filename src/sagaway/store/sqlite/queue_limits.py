"""Cluster queue limits on SQLite: admission, renewal and release in the writer's transaction
(the one writer serialises them; the rule and the WAITING reason are shared:
``store._queue_limits``)."""

from __future__ import annotations

import sqlite3
from typing import Any

from sagaway.store import _queue_limits
from sagaway.store.sql import queries
from sagaway.store.sqlite.jobs import Call

_Q = queries("sqlite")


def acquire(
    conn: sqlite3.Connection,
    slot: _queue_limits.Slot,
    waiter: _queue_limits.Waiter | None,
    concurrency: int | None,
    rate: float | None,
) -> float | None:
    """See ``Store.acquire_queue_slot`` (run in the SQLite store's writer)."""
    params = slot.params()
    if conn.execute(_Q["holds_queue_slot"], params).fetchone() is not None:
        return None  # already admitted (a repeated call)
    conn.execute(_Q["queue_limit_row"], params)
    next_start_at = float(conn.execute(_Q["lock_queue_limit"], params).fetchone()[0])
    conn.execute(_Q["drop_expired_slots"], params)
    taken = int(conn.execute(_Q["count_queue_slots"], params).fetchone()[0])
    ahead = 0
    if waiter is not None:
        conn.execute(_Q["drop_expired_waiters"], waiter.params())
        row = conn.execute(_Q["waiter_since"], waiter.params()).fetchone()
        waiter = waiter.kept(None if row is None else float(row[0]))
        ahead = int(conn.execute(_Q["waiters_ahead"], waiter.params()).fetchone()[0])
    retry_at, spaced = _queue_limits.decide(
        next_start_at, taken, concurrency=concurrency, rate=rate, now=slot.now, ahead=ahead
    )
    if retry_at is not None:
        if waiter is not None:
            conn.execute(_Q["keep_waiter"], waiter.kept(waiter.since, retry_at).params())
        return retry_at
    if waiter is not None:
        conn.execute(_Q["drop_waiter"], waiter.params())
    conn.execute(_Q["take_queue_slot"], params)
    conn.execute(_Q["space_queue_starts"], {**params, "next_start_at": spaced})
    return None


def renew(conn: sqlite3.Connection, slot: _queue_limits.Slot) -> bool:
    return conn.execute(_Q["renew_queue_slot"], slot.params()).rowcount == 1


def release(conn: sqlite3.Connection, slot: _queue_limits.Slot) -> None:
    if conn.execute(_Q["release_queue_slot"], slot.params()).rowcount:
        conn.execute(_Q["wake_queue_waiter"], slot.wake())


def leave(conn: sqlite3.Connection, slot: _queue_limits.Slot, call: dict[str, Any]) -> None:
    if conn.execute(_Q["drop_waiter"], call).rowcount:
        conn.execute(_Q["wake_queue_waiter"], slot.wake())


class QueueLimits(_queue_limits.SQLQueueLimits):
    """The queue limit transactions of ``SQLiteStore``: each is one job of its writer
    (``call``)."""

    def __init__(self, call: Call) -> None:
        self._call = call

    async def _acquire(
        self,
        slot: _queue_limits.Slot,
        waiter: _queue_limits.Waiter | None,
        concurrency: int | None,
        rate: float | None,
    ) -> float | None:
        at: float | None = await self._call(
            lambda conn: acquire(conn, slot, waiter, concurrency, rate)
        )
        return at

    async def _renew(self, slot: _queue_limits.Slot) -> bool:
        return bool(await self._call(lambda conn: renew(conn, slot)))

    async def _release(self, slot: _queue_limits.Slot) -> None:
        await self._call(lambda conn: release(conn, slot))

    async def _leave(self, slot: _queue_limits.Slot, call: dict[str, Any]) -> None:
        await self._call(lambda conn: leave(conn, slot, call))
