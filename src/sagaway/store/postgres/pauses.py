"""Pauses on PostgreSQL (see ``store.pause_verbs``; the verbs are ``_pauses.SQLPauses``).
Resuming a run that became due changes its ``next_run_at``, so the trigger announces it ready
to every process."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

from sagaway.store._pauses import Change, SQLPauses
from sagaway.store.postgres import audit as _pg_audit
from sagaway.store.postgres.conn import Conn, Q, Run


class Pauses(SQLPauses):
    """The pause verbs of ``PostgresStore`` (a collaborator given the store's ``_run``)."""

    def __init__(self, run: Run) -> None:
        self._run = run

    async def _change(self, change: Change) -> bool:
        async def op(conn: Conn, retried: bool) -> bool:
            if (await conn.execute(Q[change.query], change.params)).rowcount != 1:
                return False
            if change.then is not None:
                await conn.execute(Q[change.then], change.params)
            await _pg_audit.write(conn, change.audit, **change.about)
            return True

        # One statement alone needs no transaction of its own.
        return await self._run(op, transaction=change.audit is not None or change.then is not None)

    async def _rows(self, query: str, run_ids: Collection[str] | None) -> Sequence[Any]:
        params = {} if run_ids is None else {"run_ids": sorted(run_ids)}

        async def op(conn: Conn, retried: bool) -> list[Any]:
            return await (await conn.execute(Q[query], params)).fetchall()

        return await self._run(op, transaction=False)
