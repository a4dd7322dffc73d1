"""Retention on SQLite: a purge in chunks, each a job of the writer (which statuses and the
batch check are shared: ``store._purge``)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Awaitable, Callable, Collection
from typing import Any

from sagaway.states import WorkflowStatus
from sagaway.store import _purge
from sagaway.store.sql import queries

_Q = queries("sqlite")

SQLITE_CHUNK = 50
"""Executions deleted by one job of SQLite's writer thread at most: the workers' commits grouped
with a job wait for it (with 500, a purge under load cut their throughput by two thirds)."""


def purge_chunk(
    conn: sqlite3.Connection, *, before: float, statuses: list[str], limit: int
) -> list[str]:
    """One chunk on SQLite (a job of the writer's transaction): the run ids deleted."""
    params: dict[str, Any] = {"before": before, "statuses": json.dumps(statuses), "limit": limit}
    run_ids = [row[0] for row in conn.execute(_Q["purge_select"], params).fetchall()]
    if run_ids:
        doomed = {"run_ids": json.dumps(run_ids)}
        conn.execute(_Q["purge_steps"], doomed)
        conn.execute(_Q["purge_signals"], doomed)
        conn.execute(_Q["purge_debounced_starts"], doomed)
        conn.execute(_Q["purge_workflows"], doomed)
    return run_ids


def count(conn: sqlite3.Connection, *, before: float, statuses: list[str]) -> int:
    params = {"before": before, "statuses": json.dumps(statuses)}
    return int(conn.execute(_Q["count_purgeable"], params).fetchone()[0])


async def purge(
    call: Callable[[Callable[[sqlite3.Connection], list[str]]], Awaitable[list[str]]],
    *,
    before: float,
    statuses: Collection[WorkflowStatus] | None,
    limit: int,
) -> list[str]:
    """SQLite's ``purge_ended``: chunks of ``SQLITE_CHUNK``, each a job of its own given to
    ``call`` (the store's writer): the writer serves everyone, and a job holds the workers'
    commits of its group transaction until it is done."""
    names = _purge.ended_statuses(statuses)
    _purge.check_batch(limit)
    purged: list[str] = []
    while len(purged) < limit:
        chunk = min(limit - len(purged), SQLITE_CHUNK)

        def op(conn: sqlite3.Connection, n: int = chunk) -> list[str]:
            return purge_chunk(conn, before=before, statuses=names, limit=n)

        run_ids = await call(op)
        purged += run_ids
        if len(run_ids) < chunk:
            break
    return purged
