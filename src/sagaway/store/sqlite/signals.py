"""Messages to a workflow on SQLite: signals sent to it and cancel requests (the transactions of
``sqlite.SQLiteStore``'s verbs, run by its writer; ``postgres.signals`` is PostgreSQL's)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Collection

from sagaway.store import _params, _rows
from sagaway.store.records import AuditNote, CancelRequestRecord, WorkflowRecord
from sagaway.store.sql import queries
from sagaway.store.sqlite.audit import write as audit_entry

_Q = queries("sqlite")


def send(conn: sqlite3.Connection, send: _params.Send) -> tuple[WorkflowRecord | None, bool]:
    """``send_signal``: store a signal for the current execution under ``send.key`` and wake it
    if it waits for one of this name: (the execution, stored); (None, False) if there is no
    such key. With ``run_id``, nothing is stored unless the current execution is that one."""
    row = conn.execute(_Q["signal_target"], {"key": send.key}).fetchone()
    if row is None:
        return None, False
    record = _rows.workflow_from_row(row)
    if record.status.ended or (send.run_id is not None and record.run_id != send.run_id):
        return record, False
    stored = conn.execute(_Q["insert_signal"], send.params(record.run_id)).rowcount == 1
    if stored:
        conn.execute(_Q["wake_waiting"], send.wake(record.run_id))
        audit_entry(conn, send.audit, run_id=record.run_id)
    return record, stored


def request_cancel(
    conn: sqlite3.Connection, run_id: str, reason: str, now: float, audit: AuditNote | None
) -> bool:
    """Record a cancel request (logged, accepted or not); False if the execution has ended."""
    params = {"run_id": run_id, "reason": reason, "now": now}
    accepted = conn.execute(_Q["request_cancel"], params).rowcount == 1
    conn.execute(_Q["log_cancel_request"], {**params, "accepted": accepted})
    if accepted:
        audit_entry(conn, audit, run_id=run_id)
    return accepted


def list_cancel_requests(conn: sqlite3.Connection, run_id: str) -> list[CancelRequestRecord]:
    rows = conn.execute(_Q["list_cancel_requests"], {"run_id": run_id}).fetchall()
    return [CancelRequestRecord(run_id, r[0], r[1], bool(r[2])) for r in rows]


def cancel_requests(conn: sqlite3.Connection, run_ids: Collection[str]) -> dict[str, str]:
    params = {"run_ids": json.dumps(sorted(run_ids))}
    rows = conn.execute(_Q["cancel_requests"], params).fetchall()
    return {row["run_id"]: row["cancel_reason"] for row in rows}
