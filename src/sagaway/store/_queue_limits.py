"""Limits of activity queues shared by every process of a database (``Queue(scope="cluster")``).

State per queue: a ``queue_limits`` row (when the next start may come: starts are spaced
``1/rate`` apart, so no window of one second holds more than ``rate`` starts) and one
``queue_slots`` row per admitted attempt, with an expiry its holder pushes forward while the
attempt runs; a crashed holder's slot lapses at its expiry. An admission reads the row, counts
the live slots, takes a slot and spaces the next start in one transaction: on PostgreSQL the
queue's row is locked (``FOR UPDATE``) for it, on SQLite the one writer serialises it.
"""

from __future__ import annotations

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
