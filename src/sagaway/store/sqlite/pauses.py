"""Pauses on SQLite (see ``store.pause_verbs``): each verb one job of the writer."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Collection

from sagaway.store import _pauses
from sagaway.store.records import AuditNote, PausedCallRecord
from sagaway.store.sql import queries
from sagaway.store.sqlite.audit import write as audit_entry
from sagaway.store.sqlite.jobs import Call

_Q = queries("sqlite")


class Pauses:
    """The pause verbs of ``SQLiteStore``."""

    def __init__(self, call: Call) -> None:
        self._call = call

    async def pause_workflow(
        self, run_id: str, *, paused: bool, now: float, audit: AuditNote | None = None
    ) -> bool:
        query = "pause_workflow" if paused else "resume_workflow"

        def op(conn: sqlite3.Connection) -> bool:
            if conn.execute(_Q[query], _pauses.workflow_params(run_id, now)).rowcount != 1:
                return False
            audit_entry(conn, audit, run_id=run_id)
            return True

        return bool(await self._call(op))

    async def paused_runs(self, run_ids: Collection[str]) -> set[str]:
        params = {"run_ids": json.dumps(sorted(run_ids))}

        def op(conn: sqlite3.Connection) -> set[str]:
            return {row[0] for row in conn.execute(_Q["paused_runs"], params).fetchall()}

        found: set[str] = await self._call(op)
        return found

    async def pause_calls(
        self,
        kind: str,
        name: str,
        *,
        paused: bool,
        reason: str,
        now: float,
        audit: AuditNote | None = None,
    ) -> bool:
        params = _pauses.calls_params(kind, name, reason, now)

        def op(conn: sqlite3.Connection) -> bool:
            if paused:
                changed = conn.execute(_Q["pause_calls"], params).rowcount == 1
            else:
                changed = conn.execute(_Q["resume_calls"], params).rowcount == 1
                if changed:
                    conn.execute(_Q["wake_paused_calls"], params)
            if changed:
                audit_entry(conn, audit, target=f"{kind}:{name}")
            return changed

        return bool(await self._call(op))

    async def list_paused_calls(self) -> list[PausedCallRecord]:
        def op(conn: sqlite3.Connection) -> list[PausedCallRecord]:
            rows = conn.execute(_Q["list_paused_calls"]).fetchall()
            return [PausedCallRecord(k, n, r, float(at)) for k, n, r, at in rows]

        found: list[PausedCallRecord] = await self._call(op)
        return found
