"""Retention on PostgreSQL (see ``_purge``): one batch is one statement, its own short
transaction, that locks the oldest purgeable rows with ``FOR UPDATE SKIP LOCKED`` (two purgers
never wait on each other) and deletes their steps, signals and rows."""

from __future__ import annotations

from collections.abc import Collection

from sagaway.states import WorkflowStatus
from sagaway.store import _purge
from sagaway.store.postgres.conn import Conn, Q, Run


async def purge(
    run: Run, *, before: float, statuses: Collection[WorkflowStatus] | None, limit: int
) -> list[str]:
    """One batch: the run ids deleted (a retry after a lost acknowledgement may report fewer)."""
    _purge.check_batch(limit)
    params = {"before": before, "statuses": _purge.ended_statuses(statuses), "limit": limit}

    async def op(conn: Conn, retried: bool) -> list[str]:
        cur = await conn.execute(Q["purge_ended"], params)
        return [row[0] for row in await cur.fetchall()]

    return await run(op, transaction=False)


async def count(run: Run, *, before: float, statuses: Collection[WorkflowStatus] | None) -> int:
    params = {"before": before, "statuses": _purge.ended_statuses(statuses)}

    async def op(conn: Conn, retried: bool) -> int:
        row = await (await conn.execute(Q["count_purgeable"], params)).fetchone()
        assert row is not None
        return int(row[0])

    return await run(op, transaction=False)
