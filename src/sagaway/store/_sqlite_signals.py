"""``send_signal`` on SQLite (see ``sqlite.SQLiteStore``, whose verb it is): store a signal for
the current execution under a key and wake it if it waits for it, in the writer's transaction."""

from __future__ import annotations

import sqlite3

from sagaway.store import _params, _rows
from sagaway.store.records import WorkflowRecord
from sagaway.store.sql import queries

_Q = queries("sqlite")


def send(
    conn: sqlite3.Connection,
    key: str,
    *,
    name: str,
    payload: str,
    dedupe_id: str | None,
    now: float,
    run_id: str | None,
) -> tuple[WorkflowRecord | None, bool]:
    """(the current execution under ``key``, whether the signal was stored); (None, False)
    if there is none. With ``run_id``, nothing is stored unless it is that execution."""
    row = conn.execute(_Q["signal_target"], {"key": key}).fetchone()
    if row is None:
        return None, False
    record = _rows.workflow_from_row(row)
    if record.status.ended or (run_id is not None and record.run_id != run_id):
        return record, False
    params = _params.signal(record.run_id, name=name, payload=payload, dedupe_id=dedupe_id, now=now)
    stored = conn.execute(_Q["insert_signal"], params).rowcount == 1
    if stored:
        waiting_for = _params.signal_wait(name)
        conn.execute(
            _Q["wake_waiting"],
            _params.wake_waiting(record.run_id, waiting_for=waiting_for, now=now),
        )
    return record, stored
