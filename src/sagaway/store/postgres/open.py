"""Opening the PostgreSQL store for reading: the check that the schema is Sagaway's.

A reading open (``create=False``) must say at once, with the server's own message, when there
is no server or no Sagaway schema, which a pool waiting ``pool_timeout`` for its first
connection cannot. So the check has a connection of its own, made before the pool's. It is not
made at the same time as the pool's (which would save one connection's set-up, 2-3 ms): when
the server cannot be reached, the pool's own attempt would log warnings of its own and, without
a ``connect_timeout``, outlive the failed open.
"""

from __future__ import annotations

import psycopg
from psycopg import errors as pg_errors
from psycopg import sql

from sagaway.store.contract import DatabaseNotFound, StoreUnavailable


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())


async def schema_version(conninfo: str, *, schema: str, url: str, timeout: int) -> int:
    """The version of ``schema``'s Sagaway tables: one connection and one query, failing within
    ``timeout`` seconds with the server's own message (``StoreUnavailable``),
    ``DatabaseNotFound`` when the schema has no Sagaway tables, or ``ValueError`` for a URL
    libpq rejects."""
    try:
        conn = await psycopg.AsyncConnection.connect(
            conninfo, connect_timeout=timeout, autocommit=True
        )
    except psycopg.ProgrammingError as exc:
        raise ValueError(f"invalid PostgreSQL URL {url}: {_one_line(exc)}") from exc
    except psycopg.OperationalError as exc:
        raise StoreUnavailable(f"cannot connect to PostgreSQL at {url}: {_one_line(exc)}") from exc
    query = sql.SQL("SELECT COALESCE(MAX(version), 0) FROM {}.schema_migrations").format(
        sql.Identifier(schema)
    )
    async with conn:
        try:
            row = await (await conn.execute(query)).fetchone()
        except pg_errors.UndefinedTable:  # no such schema, or one without Sagaway's tables
            raise DatabaseNotFound(url, f"no schema {schema!r} with Sagaway's tables") from None
    return int(row[0]) if row else 0
