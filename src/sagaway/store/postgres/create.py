"""``create_workflow`` on PostgreSQL when a start is not one of a batch of inserts (a key that
is taken, a large payload, an audited start): one transaction, retried through transient
failures like every verb.

It relies on the partial unique index of current keys (``INSERT ... ON CONFLICT DO NOTHING``),
so concurrent creates of one key make one row; a retry whose first attempt committed (its
acknowledgement lost) recognises its own ``run_id`` under the key.
"""

from __future__ import annotations

from sagaway import errors
from sagaway.store import _params, _rows
from sagaway.store.contract import CreateResult
from sagaway.store.postgres import audit as _pg_audit
from sagaway.store.postgres import debounce as _pg_debounce
from sagaway.store.postgres.conn import Conn, Q, named
from sagaway.store.records import WorkflowRecord

_ROUNDS = 16
"""Bound on re-reads when the current row of a key changes under a create."""


async def run(create: _params.Create, conn: Conn) -> CreateResult:
    """``create_workflow``'s transaction (its audit entry only when it creates)."""
    await _pg_debounce.lock(conn, create)
    if create.new.debounce_key is not None:
        folded = await _pg_debounce.fold(conn, create)
        if folded is not None:
            return folded
    result = await _create(conn, create)
    if result.created:
        await _pg_audit.write(conn, create.audit, run_id=create.new.run_id)
    return result


async def _insert(conn: Conn, create: _params.Create) -> WorkflowRecord | None:
    rows = await named(conn, "insert_workflow", create.params)
    return _rows.workflow_from_row(rows[0]) if rows else None


async def _create(conn: Conn, create: _params.Create) -> CreateResult:
    new = create.new
    for _ in range(_ROUNDS):
        inserted = await _insert(conn, create)
        if inserted is not None:
            return CreateResult(inserted, created=True)
        # The key is taken. Under replace_live the current row is locked, so no one else
        # replaces or ends it before we do; if it changed meanwhile, nothing comes back.
        query = "get_current_for_update" if create.replace_live else "get_current"
        rows = await named(conn, query, {"key": new.key})
        if not rows:  # superseded since our insert looked: look again
            continue
        existing = _rows.workflow_from_row(rows[0])
        if existing.run_id == new.run_id:
            # Our own creation: this is a retry whose first commit was not acknowledged.
            error = _params.replaced_error(new.run_id)
            cur = await conn.execute(Q["replaced_by"], {"key": new.key, "error": error})
            replaced = await cur.fetchone()
            return CreateResult(
                existing, created=True, replaced_run_id=replaced[0] if replaced else None
            )
        if create.replace_live and not existing.status.ended:
            await conn.execute(
                Q["supersede"],
                _params.supersede(existing.run_id, new_run_id=new.run_id, now=create.now),
            )
            inserted = await _insert(conn, create)
            if inserted is None:  # pragma: no cover - the old row is ours, locked
                raise errors.SagawayError(f"could not replace run {existing.run_id}")
            return CreateResult(inserted, created=True, replaced_run_id=existing.run_id)
        return CreateResult(existing, created=False)
    raise errors.SagawayError(f"key {new.key!r} kept changing while creating a workflow")
