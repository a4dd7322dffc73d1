"""Messages to a workflow on PostgreSQL: signals sent to it and cancel requests (see
``postgres.PostgresStore``, whose verbs these are)."""

from __future__ import annotations

import uuid
from collections.abc import Collection

from sagaway import errors
from sagaway.store import _params, _rows
from sagaway.store.postgres import audit as _pg_audit
from sagaway.store.postgres.conn import Conn, Q, Run, exists, named
from sagaway.store.records import AuditNote, CancelRequestRecord, WorkflowRecord

_ROUNDS = 16
"""Bound on re-reads when the current row of a key changes under a send."""


async def send(run: Run, send: _params.Send) -> tuple[WorkflowRecord | None, bool]:
    """Store a signal for the current execution under ``send.key`` and wake it if it waits for
    it: (its record, stored); (None, False) if there is no such key. With ``run_id``, nothing
    is stored unless it is that execution."""
    key = send.key
    # Chosen once for all attempts: a retry after a lost acknowledgement finds the row the
    # lost attempt stored by it (a dedupe_id alone cannot tell that row from an earlier send's).
    sender = uuid.uuid4().hex

    async def op(conn: Conn, retried: bool) -> tuple[WorkflowRecord | None, bool]:
        for _ in range(_ROUNDS):
            # Locked: a receiver deciding to wait and this send are serialised (no lost
            # wake-up), and the execution cannot end between the check and the insert.
            rows = await named(conn, "signal_target", {"key": key})
            if rows:
                break
            # Nothing, or the current execution was replaced while we waited for its lock.
            if await (await conn.execute(Q["get_current"], {"key": key})).fetchone() is None:
                return None, False
        else:
            raise errors.SagawayError(f"key {key!r} kept changing while sending a signal")
        record = _rows.workflow_from_row(rows[0])
        params = {**send.params(record.run_id), "sender": sender}
        # Checked before the end: the signal the lost attempt stored may have ended the run.
        if retried and await _sent_by(conn, params, sender):
            return record, True  # the lost attempt stored it (and woke the receiver)
        if record.status.ended or (send.run_id is not None and record.run_id != send.run_id):
            return record, False
        stored = (await conn.execute(Q["insert_signal"], params)).rowcount == 1
        if stored:
            await conn.execute(Q["wake_waiting"], send.wake(record.run_id))
            await _pg_audit.write(conn, send.audit, run_id=record.run_id)
        return record, stored

    return await run(op)


async def _sent_by(conn: Conn, params: _params.Params, sender: str) -> bool:
    """Whether the send whose token is ``sender`` stored the signal ``params`` describe."""
    if params["dedupe_id"] is None:
        return await exists(conn, "signal_sent_as", params)
    # The row holding a dedupe_id may be an earlier send's: only its sender tells.
    row = await (await conn.execute(Q["deduped_by"], params)).fetchone()
    return row is not None and row[0] == sender


async def request_cancel(
    run: Run, run_id: str, *, reason: str, now: float, audit: AuditNote | None = None
) -> bool:
    """Record a cancel request on a live execution; False if it has ended. An ``audit`` entry
    makes it a transaction of two statements (the request, then the entry if accepted)."""
    params = {"run_id": run_id, "reason": reason, "now": now}

    async def op(conn: Conn, retried: bool) -> bool:
        row = await (await conn.execute(Q["request_cancel"], params)).fetchone()
        accepted = bool(row is not None and row[0])
        if accepted:
            await _pg_audit.write(conn, audit, run_id=run_id)
        return accepted

    return await run(op, transaction=audit is not None)


async def list_cancel_requests(run: Run, run_id: str) -> list[CancelRequestRecord]:
    """Every cancel request made to ``run_id``, in order (see ``Store.list_cancel_requests``)."""

    async def op(conn: Conn, retried: bool) -> list[CancelRequestRecord]:
        cur = await conn.execute(Q["list_cancel_requests"], {"run_id": run_id})
        return [
            CancelRequestRecord(run_id, reason, at, bool(accepted))
            for reason, at, accepted in await cur.fetchall()
        ]

    return await run(op, transaction=False)


async def cancel_requests(run: Run, run_ids: Collection[str]) -> dict[str, str]:
    """The cancel reasons recorded on those of ``run_ids`` that have one."""

    async def op(conn: Conn, retried: bool) -> dict[str, str]:
        cur = await conn.execute(Q["cancel_requests"], {"run_ids": sorted(run_ids)})
        return {run_id: reason for run_id, reason in await cur.fetchall()}

    return await run(op, transaction=False)
