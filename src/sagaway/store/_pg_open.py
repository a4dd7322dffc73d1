"""Opening the PostgreSQL store for reading: the schema check and the pool's first connection,
made at the same time.

A reading open (``create=False``) must say at once, with the server's own message, when there
is no server or no Sagaway schema, which a pool waiting ``pool_timeout`` for its first
connection cannot. So the check has a connection of its own. Each connection costs the server
a new backend (3-6 ms here), and a command such as ``sagaway list`` pays for both before its
one query: made one after the other they were a sixth of its time beyond the interpreter's
start. The pool's connection is therefore made while the check runs, and given up if the check
fails.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable

import psycopg
from psycopg import errors as pg_errors
from psycopg import sql

from sagaway.store._pg_conn import Pool
from sagaway.store.base import DatabaseNotFound, StoreUnavailable


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


async def open_checked(pool: Awaitable[Pool], check: Awaitable[int]) -> tuple[Pool, int]:
    """``pool`` (an ``open_pool`` call) and ``check`` (a ``schema_version`` call) run together;
    when the check fails, the pool is closed, or its opening cancelled, and the check's error
    raised."""
    opening = asyncio.ensure_future(pool)
    try:
        version = await check
    except BaseException:
        opening.cancel()
        await asyncio.wait({opening})
        if not opening.cancelled() and opening.exception() is None:
            await opening.result().close()
        raise
    return await opening, version
