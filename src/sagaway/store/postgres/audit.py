"""The audit trail on PostgreSQL (see ``_audit``): the write a verb adds to its transaction,
and the verbs that read the trail or write a lone entry."""

from __future__ import annotations

from typing import TypeVar

from sagaway.store import _audit
from sagaway.store._listing import POSTGRES
from sagaway.store.postgres.conn import Conn, Q, Run, dict_rows
from sagaway.store.records import AuditNote, AuditQuery, AuditRecord

T = TypeVar("T")


async def write(
    conn: Conn, note: AuditNote | None, *, run_id: str | None = None, target: str | None = None
) -> None:
    """Write ``note`` in the transaction of ``conn`` (nothing when None): about the execution
    ``run_id`` (its key read from its row), else about ``target``."""
    if note is None:
        return
    query = "insert_audit" if run_id is None else "insert_audit_for_run"
    await conn.execute(Q[query], _audit.params(note, run_id=run_id, target=target))


class Audit:
    """The audit verbs of ``PostgresStore`` (a collaborator given the store's ``_run``)."""

    def __init__(self, run: Run) -> None:
        self._run = run

    async def record_audit(self, note: AuditNote, *, target: str | None = None) -> None:
        async def op(conn: Conn, retried: bool) -> None:
            await write(conn, note, target=target)

        await self._run(op, transaction=False)

    async def list_audit(self, query: AuditQuery) -> list[AuditRecord]:
        text, values = _audit.list_query(POSTGRES, query)

        async def op(conn: Conn, retried: bool) -> list[AuditRecord]:
            return [_audit.record_from_row(row) for row in await dict_rows(conn, text, values)]

        return await self._run(op, transaction=False)
