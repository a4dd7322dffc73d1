"""Creating a toolkit table (the idempotency table, the outbox, the inbox), written once."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import LiteralString

from sagaway.toolkit import localdb


def install(
    conn: localdb.Connection, schema: Mapping[localdb.Dialect, Sequence[LiteralString]]
) -> None:
    """Run the statements of ``conn``'s dialect in ``schema`` in one transaction (commits): a
    table's ``install``, idempotent as its statements say ``IF NOT EXISTS``."""
    statements = schema[localdb.dialect_of(conn)]
    with localdb.transaction(conn):
        for statement in statements:
            conn.execute(statement)


def both(statement: LiteralString) -> dict[localdb.Dialect, LiteralString]:
    """One statement written once for both dialects: SQLite's ``?`` placeholders are
    PostgreSQL's ``%s`` (for a statement that differs otherwise, write both)."""
    return {
        localdb.Dialect.SQLITE: statement,
        localdb.Dialect.POSTGRES: statement.replace("?", "%s"),
    }
