"""Pauses on SQLite (see ``store.pause_verbs``; the verbs are ``_pauses.SQLPauses``): each
verb one job of the writer."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Collection, Sequence
from typing import Any

from sagaway.store._pauses import Change, SQLPauses
from sagaway.store.sql import queries
from sagaway.store.sqlite.audit import write as audit_entry
from sagaway.store.sqlite.jobs import Call

_Q = queries("sqlite")


class Pauses(SQLPauses):
    """The pause verbs of ``SQLiteStore``."""

    def __init__(self, call: Call) -> None:
        self._call = call

    async def _change(self, change: Change) -> bool:
        def op(conn: sqlite3.Connection) -> bool:
            if conn.execute(_Q[change.query], change.params).rowcount != 1:
                return False
            if change.then is not None:
                conn.execute(_Q[change.then], change.params)
            audit_entry(conn, change.audit, **change.about)
            return True

        return bool(await self._call(op))

    async def _rows(self, query: str, run_ids: Collection[str] | None) -> Sequence[Any]:
        params = {} if run_ids is None else {"run_ids": json.dumps(sorted(run_ids))}
        rows: list[Any] = await self._call(lambda conn: conn.execute(_Q[query], params).fetchall())
        return rows
