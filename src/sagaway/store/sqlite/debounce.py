"""Debounced starts on SQLite (``create_workflow`` of a start with a ``debounce_key``), run in
the store's writer thread: one writer, so the open burst read here is still open when it is
postponed, and two starts of one burst never both create one.

A start whose idempotency key was folded into a burst before finds that burst's execution (a
retried start); a start whose key names a current execution, or that finds no open burst, is
created as any other (``None``: the caller goes on with the plain insert).
"""

from __future__ import annotations

import sqlite3

from sagaway.store import _params, _rows
from sagaway.store.contract import CreateResult
from sagaway.store.sql import queries

_Q = queries("sqlite")


def fold(conn: sqlite3.Connection, create: _params.Create) -> CreateResult | None:
    """Fold the start ``create`` into its open burst, or None to create it (see above)."""
    new = create.new
    joined = conn.execute(_Q["debounced_start"], {"key": new.key}).fetchone()
    if joined is not None:
        row = conn.execute(_Q["get_run"], {"run_id": joined["run_id"]}).fetchone()
        if row is not None:
            return CreateResult(_rows.workflow_from_row(row), created=False)
    if conn.execute(_Q["get_current"], {"key": new.key}).fetchone() is not None:
        return None
    burst = conn.execute(
        _Q["open_burst"], {"name": new.name, "debounce_key": new.debounce_key}
    ).fetchone()
    if burst is None:
        return None
    row = conn.execute(
        _Q["postpone_burst"], _params.postpone(new, burst, now=create.now)
    ).fetchone()
    conn.execute(
        _Q["record_debounced_start"],
        {"key": new.key, "run_id": burst["run_id"], "now": create.now},
    )
    return CreateResult(_rows.workflow_from_row(row), created=False)
