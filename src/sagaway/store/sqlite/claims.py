"""Claiming due work on SQLite (``SQLiteStore.claim_due`` and ``next_due``), run in the store's
writer thread: one writer, so a candidate is claimed by a compare-and-set on its lease token.

A claim takes only executions of the worker's task queues and code versions (see ``_params``),
and a PENDING execution with a per-key limit only while fewer than its limit of its key run.
"""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from typing import Any

from sagaway.randomness import new_id
from sagaway.store import _params, _rows
from sagaway.store.records import Lease, WorkflowRecord
from sagaway.store.sql import queries

_Q = queries("sqlite")

Claimed = list[tuple[WorkflowRecord, Lease]]


def due_filter(due: _params.Due) -> dict[str, Any]:
    """The task queue and code version parameters of ``due_candidates`` and ``next_due``."""
    return {
        "any_queue": due.queues is None,
        "queues": json.dumps(sorted(due.queues or ())),
        **_params.version_filter(due.versions, arrays=False),
    }


def claim_due(conn: sqlite3.Connection, claim: _params.Claim) -> Claimed:
    """Leases on up to ``limit`` due executions (see ``Store.claim_due``)."""
    excluded, limit, now = set(claim.exclude), claim.limit, claim.now
    rows = conn.execute(
        _Q["due_candidates"],
        {"now": now, "limit": limit + len(excluded), **due_filter(claim.due)},
    ).fetchall()
    claimed: Claimed = []
    for due in rows:
        if due["run_id"] in excluded or len(claimed) >= limit or _key_full(conn, due):
            continue
        taken = _claim_one(
            conn, due, owner=claim.due.owner, now=now, lease_timeout=claim.lease_timeout
        )
        if taken is not None:
            claimed.append(taken)
    return claimed


def _key_full(conn: sqlite3.Connection, due: sqlite3.Row) -> bool:
    """Whether a PENDING candidate's per-key limit is reached now: the candidates were read
    before this claim took others of the same key (one writer: the count is exact)."""
    if due["concurrency_key"] is None or due["status"] != "PENDING":
        return False
    params = {"concurrency_key": due["concurrency_key"]}
    running = int(conn.execute(_Q["running_with_key"], params).fetchone()[0])
    return running >= int(due["concurrency_limit"])


def _claim_one(
    conn: sqlite3.Connection, due: sqlite3.Row, *, owner: str, now: float, lease_timeout: float
) -> tuple[WorkflowRecord, Lease] | None:
    """Take the candidate ``due`` unless its lease changed since it was read."""
    run_id = due["run_id"]
    lease = Lease(new_id(), owner, now + lease_timeout)
    cur = conn.execute(
        _Q["claim"],
        {
            "run_id": run_id,
            "old_token": due["lease_token"],
            "new_token": lease.token,
            "owner": owner,
            "expires_at": lease.expires_at,
            "now": now,
        },
    )
    if cur.rowcount != 1:
        return None
    record = _rows.workflow_from_row(conn.execute(_Q["get_run"], {"run_id": run_id}).fetchone())
    if due["lease_owner"] is not None:
        record = dataclasses.replace(record, previous_owner=due["lease_owner"])
    return record, lease


def next_due(conn: sqlite3.Connection, due: _params.Due) -> float | None:
    """See ``Store.next_due``."""
    params = {"owner": due.owner, **due_filter(due)}
    value = conn.execute(_Q["next_due"], params).fetchone()[0]
    return None if value is None else float(value)
