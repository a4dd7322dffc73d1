"""A fork on SQLite, in the writer's transaction (the plan is shared: ``store._fork``)."""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from sagaway.store import _fork, _rows
from sagaway.store.contract import CreateResult
from sagaway.store.sql import queries
from sagaway.store.sqlite.audit import write as audit_entry

_Q = queries("sqlite")


def run(conn: sqlite3.Connection, fork: _fork.Fork) -> CreateResult | None:
    """The fork in the SQLite writer's transaction (see ``SQLiteStore.fork_workflow``)."""
    params = fork.params()
    params["call_ids"] = json.dumps(params["call_ids"])
    replacements = fork.replacements()  # a bad one is refused before anything is written
    if fork.call_ids and conn.execute(_Q["fork_lost_children"], params).fetchone():
        return None  # a purge took a child whose start the fork keeps (see _fork)
    if conn.execute(_Q["fork_workflow"], params).rowcount == 1:
        if fork.call_ids:
            conn.execute(_Q["fork_steps"], params)
        for query, values in replacements:
            conn.execute(_Q[query], values)
        if fork.call_ids:
            _copy_published(conn, fork, params)
        audit_entry(conn, fork.audit, run_id=fork.run_id)
        row = conn.execute(_Q["get_run"], {"run_id": fork.run_id}).fetchone()
        return CreateResult(_rows.workflow_from_row(row), created=True)
    row = conn.execute(_Q["get_current"], {"key": fork.key}).fetchone()
    if row is None:
        return None  # the source is not (or no longer) an ended execution
    return CreateResult(_rows.workflow_from_row(row), created=False)


def _copy_published(conn: sqlite3.Connection, fork: _fork.Fork, params: dict[str, Any]) -> None:
    """What the kept publish steps published, copied into the fork (see ``_fork``)."""
    for copy in fork.copied_outputs(conn.execute(_Q["fork_outputs"], params).fetchall()):
        conn.execute(_Q["fork_output"], copy)
    writes = conn.execute(_Q["fork_attribute_writes"], params).fetchall()
    for attribute in fork.copied_attributes(writes):
        conn.execute(_Q["insert_attribute_write"], attribute)
        conn.execute(_Q["upsert_search_attribute"], attribute)
