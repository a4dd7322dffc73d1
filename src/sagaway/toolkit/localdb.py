"""A service's own database: which driver a connection is, and its local transactions.

The idempotency-key table (:mod:`sagaway.toolkit.idempotency`) and the transactional outbox
(:mod:`sagaway.toolkit.outbox`) live in the *service's* database, not in Sagaway's, because their
whole point is to commit in the same local transaction as the business update. They therefore
take the connection the service already uses, as it is: a ``sqlite3.Connection`` or a psycopg 3
``psycopg.Connection``. Both drivers are synchronous, so these helpers are too (the one place in
Sagaway where I/O is not ``async``: the caller's transaction decides).
"""

from __future__ import annotations

import contextlib
import enum
import sqlite3
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, TypeAlias

if TYPE_CHECKING:
    import psycopg

    Connection: TypeAlias = sqlite3.Connection | psycopg.Connection[Any]
else:
    Connection: TypeAlias = Any


class Dialect(enum.Enum):
    """The SQL dialect of a service database."""

    SQLITE = "sqlite"
    POSTGRES = "postgres"


def dialect_of(conn: Connection) -> Dialect:
    """The dialect of ``conn``; TypeError for drivers other than sqlite3 and psycopg 3."""
    if isinstance(conn, sqlite3.Connection):
        return Dialect.SQLITE
    module = type(conn).__module__
    if module.startswith("psycopg") and hasattr(conn, "transaction"):
        if type(conn).__name__.startswith("Async"):
            raise TypeError(
                "psycopg.AsyncConnection is not supported here: these helpers join the caller's "
                "transaction synchronously; use a psycopg.Connection (e.g. in a thread)"
            )
        return Dialect.POSTGRES
    raise TypeError(
        f"expected a sqlite3.Connection or a psycopg (3) Connection, got {type(conn).__name__}"
    )


def in_transaction(conn: Connection) -> bool:
    """Whether a transaction is open on ``conn`` right now."""
    if isinstance(conn, sqlite3.Connection):
        return conn.in_transaction
    dialect_of(conn)
    import psycopg.pq

    return bool(conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE)


def require_transaction_or_implicit(conn: Connection, what: str) -> None:
    """Refuse ``what`` on an autocommit connection outside a transaction.

    In the drivers' default modes the first statement opens a transaction implicitly, so the
    statement joins whatever the caller commits next. In autocommit mode it would commit on its
    own, separated from the business update: exactly what an outbox or a key table must avoid.
    """
    if in_transaction(conn):
        return
    autocommit = (
        conn.isolation_level is None
        if isinstance(conn, sqlite3.Connection)
        else bool(getattr(conn, "autocommit", False))
    )
    if autocommit:
        raise RuntimeError(
            f"{what} must run inside the transaction of the business update, but the "
            "connection is in autocommit mode with no transaction open; wrap both in "
            "`with sagaway.localdb.transaction(conn):`"
        )


@contextlib.contextmanager
def transaction(conn: Connection) -> Iterator[None]:
    """A transaction on ``conn``, or a savepoint inside the caller's open transaction.

    A new transaction commits when the block ends and rolls back on an exception. Inside an open
    transaction the block is a savepoint: an exception undoes only the block, and the caller
    still decides whether to commit. On SQLite a new transaction is ``BEGIN IMMEDIATE``: it takes
    the write lock at once, so two writers queue on ``busy_timeout`` instead of one failing with
    "database is locked" when it upgrades a read snapshot that another writer made stale.
    """
    if not isinstance(conn, sqlite3.Connection):
        dialect_of(conn)  # TypeError for other drivers
        with conn.transaction():  # psycopg: a savepoint when a transaction is open
            yield
        return
    if conn.in_transaction:
        conn.execute("SAVEPOINT sagaway_localdb")
        try:
            yield
        except BaseException:
            conn.execute("ROLLBACK TO SAVEPOINT sagaway_localdb")
            conn.execute("RELEASE SAVEPOINT sagaway_localdb")
            raise
        conn.execute("RELEASE SAVEPOINT sagaway_localdb")
        return
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        conn.rollback()
        raise
    conn.commit()


def connect_sqlite(path: str, *, timeout: float = 30.0) -> sqlite3.Connection:
    """A SQLite connection set up for a service database: WAL, NORMAL sync, busy timeout.

    WAL lets readers go on while a writer commits; ``timeout`` is how long a writer waits for
    another writer's lock before "database is locked".
    """
    conn = sqlite3.connect(path, timeout=timeout)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    return conn
