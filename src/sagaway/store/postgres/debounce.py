"""Debounced starts and per-key order on PostgreSQL: what ``create_workflow`` does first for a
start with a ``debounce_key`` or an ``ordering_key``, in its transaction.

Such a start first takes the advisory locks of its burst and of its key's line
(``_params.start_lock``, held until commit): concurrent starts of one burst or one line take
turns, so each reads the open burst, or the line's last place, as the one before it left them
(two inserts reading the same last place would share it). The open burst is locked too
(``FOR UPDATE``): a claim skips it while it is postponed, and once a claim has taken it, it is
no longer open and the start begins a new burst.
"""

from __future__ import annotations

from sagaway.store import _params, _rows
from sagaway.store.contract import CreateResult
from sagaway.store.postgres.conn import Conn, Q, named


async def lock(conn: Conn, create: _params.Create) -> None:
    """The start's advisory locks, in a fixed order (burst, then line)."""
    for key in _params.start_lock(create.new):
        await conn.execute(Q["lock_start_key"], {"lock_key": key})


async def fold(conn: Conn, create: _params.Create) -> CreateResult | None:
    """Fold the start ``create`` into its open burst, or None to create it (as on SQLite:
    ``sagaway.store.sqlite.debounce``)."""
    new = create.new
    joined = await named(conn, "debounced_start", {"key": new.key})
    if joined:
        rows = await named(conn, "get_run", {"run_id": joined[0]["run_id"]})
        if rows:
            return CreateResult(_rows.workflow_from_row(rows[0]), created=False)
    if await named(conn, "get_current", {"key": new.key}):
        return None
    bursts = await named(conn, "open_burst", {"name": new.name, "debounce_key": new.debounce_key})
    if not bursts:
        return None
    burst = bursts[0]
    rows = await named(conn, "postpone_burst", _params.postpone(new, burst, now=create.now))
    if not rows:  # pragma: no cover - the burst is locked
        return None
    params = {"key": new.key, "run_id": burst["run_id"], "now": create.now}
    await conn.execute(Q["record_debounced_start"], params)
    return CreateResult(_rows.workflow_from_row(rows[0]), created=False)
