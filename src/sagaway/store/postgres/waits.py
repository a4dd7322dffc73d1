"""Durable waits on PostgreSQL: a workflow receiving a signal, or waiting for its child, locks
its own row before it looks, so a sender or the child's end (which take the same locks, child
first, then parent) cannot slip between its look and its wait."""

from __future__ import annotations

from sagaway.store import _params, _rows
from sagaway.store.postgres.conn import Conn, Q, Run, named
from sagaway.store.postgres.fencing import lock_owned
from sagaway.store.records import WorkflowRecord


async def receive(run: Run, receive: _params.Receive) -> str | None:
    """``receive_signal``: the payload delivered, or None (the execution waits if ``wait``)."""
    run_id, wait, now = receive.run_id, receive.wait, receive.now
    waited = {"run_id": run_id, "waiting_for": receive.waiting_for, "now": now}

    async def op(conn: Conn, retried: bool) -> str | None:
        if not await lock_owned(
            conn, run_id, receive.token, waited=waited if retried and wait else None
        ):
            return None  # the lost attempt started the wait
        if retried:
            cur = await conn.execute(
                Q["consumed_by"], {"run_id": run_id, "call_id": receive.call_id}
            )
            delivered = await cur.fetchone()
            if delivered is not None:  # the lost attempt delivered this one
                return str(delivered[0])
        cur = await conn.execute(Q["pending_signals"], receive.pending())
        payload, writes = receive.writes(await cur.fetchall())
        for query, params in writes:
            await conn.execute(Q[query], params)
        return payload

    return await run(op)


async def wait_for_child(
    run: Run, run_id: str, *, token: str, child_key: str, wait: bool, now: float
) -> WorkflowRecord | None:
    """``wait_for_child``: the child's current execution (None if none); waits if ``wait`` and
    the child has not ended."""
    waiting_for = _params.child_wait(child_key)
    waited = {"run_id": run_id, "waiting_for": waiting_for, "now": now}

    async def op(conn: Conn, retried: bool) -> WorkflowRecord | None:
        # Child first, then parent: the order in which the child's end takes them.
        rows = await named(conn, "get_current_shared", {"key": child_key})
        child = _rows.workflow_from_row(rows[0]) if rows else None
        if not await lock_owned(conn, run_id, token, waited=waited if retried and wait else None):
            return child  # the lost attempt started the wait
        if child is not None and not child.status.ended and wait:
            await conn.execute(
                Q["wait_owned"],
                _params.wait(
                    run_id, token=token, waiting_for=waiting_for, next_run_at=None, now=now
                ),
            )
        return child

    return await run(op)
