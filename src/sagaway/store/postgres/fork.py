"""``fork_workflow`` on PostgreSQL (see ``_fork``): one transaction, retried through transient
failures like every verb; a retry whose first attempt committed finds its own run under the key."""

from __future__ import annotations

import dataclasses
from typing import Any

from sagaway.store import _rows
from sagaway.store._fork import Fork
from sagaway.store.contract import CreateResult
from sagaway.store.postgres import audit as _pg_audit
from sagaway.store.postgres.conn import Conn, Q, Run, named


async def run_postgres(run: Run, fork: Fork) -> CreateResult | None:
    """The fork as one transaction on ``run`` (a PostgresStore's ``_run``)."""
    params = fork.params()
    replacements = fork.replacements()  # a bad one is refused before the transaction

    async def op(conn: Conn, retried: bool) -> CreateResult | None:
        if fork.call_ids and await named(conn, "fork_lost_children", params):
            return None  # a purge took a child whose start the fork keeps (see _fork)
        rows = await named(conn, "fork_workflow", params)
        if rows:
            if fork.call_ids:
                await conn.execute(Q["fork_steps"], params)
            for query, values in replacements:
                await conn.execute(Q[query], values)
            if fork.call_ids:
                await _copy_published(conn, fork, params)
            await _pg_audit.write(conn, fork.audit, run_id=fork.run_id)
            record = _rows.workflow_from_row(rows[0])
            if fork.payloads is not None:  # RETURNING gave the copy's arguments
                record = dataclasses.replace(record, args=fork.payloads.args)
            return CreateResult(record, created=True)
        rows = await named(conn, "get_current", {"key": fork.key})
        if not rows:
            return None  # the source is not (or no longer) an ended execution
        existing = _rows.workflow_from_row(rows[0])
        # Our own run: a retry whose first commit was not acknowledged (steps included).
        return CreateResult(existing, created=existing.run_id == fork.run_id)

    return await run(op)


async def _copy_published(conn: Conn, fork: Fork, params: dict[str, Any]) -> None:
    """What the kept publish steps published, copied into the fork (see ``_fork``)."""
    copies = fork.copied_outputs(await named(conn, "fork_outputs", params))
    async with conn.cursor() as cur:
        if copies:
            await cur.executemany(Q["fork_output"], copies)
        writes = fork.copied_attributes(await named(conn, "fork_attribute_writes", params))
        for attribute in writes:
            await cur.execute(Q["insert_attribute_write"], attribute)
            await cur.execute(Q["upsert_search_attribute"], attribute)
