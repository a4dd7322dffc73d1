"""Cluster queue limits on SQLite: admission, renewal and release in the writer's transaction
(the one writer serialises them; the rule and the WAITING reason are shared:
``store._queue_limits``)."""

from __future__ import annotations

import sqlite3

from sagaway.store import _queue_limits
from sagaway.store.sql import queries
from sagaway.store.sqlite.jobs import Call

_Q = queries("sqlite")


def acquire(
    conn: sqlite3.Connection,
    queue: str,
    *,
    holder: str,
    concurrency: int | None,
    rate: float | None,
    expires_at: float,
    now: float,
) -> float | None:
    """See ``Store.acquire_queue_slot`` (run in the SQLite store's writer)."""
    params = {"queue": queue, "holder": holder, "now": now, "expires_at": expires_at}
    if conn.execute(_Q["holds_queue_slot"], params).fetchone() is not None:
        return None  # already admitted (a repeated call)
    conn.execute(_Q["queue_limit_row"], params)
    next_start_at = float(conn.execute(_Q["lock_queue_limit"], params).fetchone()[0])
    conn.execute(_Q["drop_expired_slots"], params)
    taken = int(conn.execute(_Q["count_queue_slots"], params).fetchone()[0])
    retry_at, spaced = _queue_limits.decide(
        next_start_at, taken, concurrency=concurrency, rate=rate, now=now
    )
    if retry_at is not None:
        return retry_at
    conn.execute(_Q["take_queue_slot"], params)
    conn.execute(_Q["space_queue_starts"], {**params, "next_start_at": spaced})
    return None


def renew(
    conn: sqlite3.Connection, queue: str, *, holder: str, expires_at: float, now: float
) -> bool:
    params = {"queue": queue, "holder": holder, "now": now, "expires_at": expires_at}
    return conn.execute(_Q["renew_queue_slot"], params).rowcount == 1


def release(conn: sqlite3.Connection, queue: str, *, holder: str, now: float) -> None:
    if conn.execute(_Q["release_queue_slot"], {"queue": queue, "holder": holder}).rowcount:
        conn.execute(
            _Q["wake_queue_waiter"], {"waiting_for": _queue_limits.waiting_for(queue), "now": now}
        )


class QueueLimits:
    """The queue limit verbs of ``SQLiteStore``: each is one job of its writer (``call``)."""

    def __init__(self, call: Call) -> None:
        self._call = call

    async def acquire_queue_slot(
        self,
        queue: str,
        *,
        holder: str,
        concurrency: int | None,
        rate_per_second: float | None,
        expires_at: float,
        now: float,
    ) -> float | None:
        at: float | None = await self._call(
            lambda conn: acquire(
                conn,
                queue,
                holder=holder,
                concurrency=concurrency,
                rate=rate_per_second,
                expires_at=expires_at,
                now=now,
            )
        )
        return at

    async def renew_queue_slot(
        self, queue: str, *, holder: str, expires_at: float, now: float
    ) -> bool:
        return bool(
            await self._call(
                lambda conn: renew(conn, queue, holder=holder, expires_at=expires_at, now=now)
            )
        )

    async def release_queue_slot(self, queue: str, *, holder: str, now: float) -> None:
        await self._call(lambda conn: release(conn, queue, holder=holder, now=now))
