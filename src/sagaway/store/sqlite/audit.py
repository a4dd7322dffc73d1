"""The audit trail on SQLite: an entry written in the writer's transaction, and the audit
verbs (the parameters, rows and listing query are shared: ``store._audit``)."""

from __future__ import annotations

import sqlite3

from sagaway.store import _audit
from sagaway.store._listing import SQLITE
from sagaway.store.records import AuditNote, AuditQuery, AuditRecord
from sagaway.store.sql import queries
from sagaway.store.sqlite.jobs import Call

_Q = queries("sqlite")


def write(
    conn: sqlite3.Connection,
    note: AuditNote | None,
    *,
    run_id: str | None = None,
    target: str | None = None,
) -> None:
    """Write ``note`` in the transaction of ``conn`` (nothing when None): about the execution
    ``run_id`` (its key read from its row), else about ``target``."""
    if note is None:
        return
    query = "insert_audit" if run_id is None else "insert_audit_for_run"
    conn.execute(_Q[query], _audit.params(note, run_id=run_id, target=target))


class Audit:
    """The audit verbs of ``SQLiteStore``: each is one job of its writer (``call``)."""

    def __init__(self, call: Call) -> None:
        self._call = call

    async def record_audit(self, note: AuditNote, *, target: str | None = None) -> None:
        await self._call(lambda conn: write(conn, note, target=target))

    async def list_audit(self, query: AuditQuery) -> list[AuditRecord]:
        text, values = _audit.list_query(SQLITE, query)

        def op(conn: sqlite3.Connection) -> list[AuditRecord]:
            return [_audit.record_from_row(row) for row in conn.execute(text, values).fetchall()]

        return await self._call(op)
