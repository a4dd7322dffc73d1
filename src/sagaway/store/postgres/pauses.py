"""Pauses on PostgreSQL (see ``store.pause_verbs``). Resuming a run that became due changes
its ``next_run_at``, so the trigger announces it ready to every process."""

from __future__ import annotations

from collections.abc import Collection

from sagaway.store import _pauses
from sagaway.store.postgres import audit as _pg_audit
from sagaway.store.postgres.conn import Conn, Q, Run
from sagaway.store.records import AuditNote, PausedCallRecord


class Pauses:
    """The pause verbs of ``PostgresStore`` (a collaborator given the store's ``_run``)."""

    def __init__(self, run: Run) -> None:
        self._run = run

    async def pause_workflow(
        self, run_id: str, *, paused: bool, now: float, audit: AuditNote | None = None
    ) -> bool:
        query = Q["pause_workflow" if paused else "resume_workflow"]
        params = _pauses.workflow_params(run_id, now)

        async def op(conn: Conn, retried: bool) -> bool:
            if (await conn.execute(query, params)).rowcount != 1:
                return False
            await _pg_audit.write(conn, audit, run_id=run_id)
            return True

        return await self._run(op, transaction=audit is not None)

    async def paused_runs(self, run_ids: Collection[str]) -> set[str]:
        params = {"run_ids": sorted(run_ids)}

        async def op(conn: Conn, retried: bool) -> set[str]:
            cur = await conn.execute(Q["paused_runs"], params)
            return {row[0] for row in await cur.fetchall()}

        return await self._run(op, transaction=False)

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

        async def op(conn: Conn, retried: bool) -> bool:
            if paused:
                changed = (await conn.execute(Q["pause_calls"], params)).rowcount == 1
            else:
                changed = (await conn.execute(Q["resume_calls"], params)).rowcount == 1
                if changed:
                    await conn.execute(Q["wake_paused_calls"], params)
            if changed:
                await _pg_audit.write(conn, audit, target=f"{kind}:{name}")
            return changed

        return await self._run(op, transaction=True)

    async def list_paused_calls(self) -> list[PausedCallRecord]:
        async def op(conn: Conn, retried: bool) -> list[PausedCallRecord]:
            cur = await conn.execute(Q["list_paused_calls"], {})
            return [PausedCallRecord(k, n, r, float(at)) for k, n, r, at in await cur.fetchall()]

        return await self._run(op, transaction=False)
