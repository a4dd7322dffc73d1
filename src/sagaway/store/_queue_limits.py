"""Limits of activity queues shared by every process of a database (``Queue(scope="cluster")``).

State per queue: a ``queue_limits`` row (when the next start may come: starts are spaced
``1/rate`` apart, so no window of one second holds more than ``rate`` starts) and one
``queue_slots`` row per admitted attempt, with an expiry its holder pushes forward while the
attempt runs; a crashed holder's slot lapses at its expiry. An admission reads the row, counts
the live slots, takes a slot and spaces the next start in one transaction: on PostgreSQL the
queue's row is locked (``FOR UPDATE``) for it, on SQLite the one writer serialises it.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Awaitable, Callable
from typing import Any

from sagaway.store.sql import queries

_SQ = queries("sqlite")


def waiting_for(queue: str) -> str:
    """What a workflow waiting for a slot or a start of ``queue`` is WAITING for."""
    return f"queue:{queue}"


def decide(
    next_start_at: float, taken: int, *, concurrency: int | None, rate: float | None, now: float
) -> tuple[float | None, float | None]:
    """``(retry_at, next_start_at)``: None and the next start's earliest time (unchanged if
    there is no rate) when an attempt may start now; else when to try again (``now`` when only
    a slot's release can let it in, which nobody can foresee) and None."""
    if rate is not None and next_start_at > now:
        return next_start_at, None
    if concurrency is not None and taken >= concurrency:
        return now, None
    return None, (now + 1.0 / rate if rate is not None else next_start_at)


def sqlite_acquire(
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
    if conn.execute(_SQ["holds_queue_slot"], params).fetchone() is not None:
        return None  # already admitted (a repeated call)
    conn.execute(_SQ["queue_limit_row"], params)
    next_start_at = float(conn.execute(_SQ["lock_queue_limit"], params).fetchone()[0])
    conn.execute(_SQ["drop_expired_slots"], params)
    taken = int(conn.execute(_SQ["count_queue_slots"], params).fetchone()[0])
    retry_at, spaced = decide(next_start_at, taken, concurrency=concurrency, rate=rate, now=now)
    if retry_at is not None:
        return retry_at
    conn.execute(_SQ["take_queue_slot"], params)
    conn.execute(_SQ["space_queue_starts"], {**params, "next_start_at": spaced})
    return None


def sqlite_renew(
    conn: sqlite3.Connection, queue: str, *, holder: str, expires_at: float, now: float
) -> bool:
    params = {"queue": queue, "holder": holder, "now": now, "expires_at": expires_at}
    return conn.execute(_SQ["renew_queue_slot"], params).rowcount == 1


def sqlite_release(conn: sqlite3.Connection, queue: str, *, holder: str, now: float) -> None:
    if conn.execute(_SQ["release_queue_slot"], {"queue": queue, "holder": holder}).rowcount:
        conn.execute(_SQ["wake_queue_waiter"], {"waiting_for": waiting_for(queue), "now": now})


class SQLiteQueueLimits:
    """The queue limit verbs of ``SQLiteStore`` (run in its writer thread)."""

    _call: Callable[[Callable[[sqlite3.Connection], Any]], Awaitable[Any]]

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
            lambda conn: sqlite_acquire(
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
                lambda conn: sqlite_renew(
                    conn, queue, holder=holder, expires_at=expires_at, now=now
                )
            )
        )

    async def release_queue_slot(self, queue: str, *, holder: str, now: float) -> None:
        await self._call(lambda conn: sqlite_release(conn, queue, holder=holder, now=now))
