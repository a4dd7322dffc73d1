"""The PostgreSQL store's connections: the pool (opened, migrated under an advisory lock,
closed), the listening connections (``listener``) and ``_run``, one transaction retried on
transient failures (``conn.run``). ``PostgresStore`` (``store``) adds the verbs."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, TypeVar

from psycopg import sql

from sagaway import errors
from sagaway.store import migrations as _migrations
from sagaway.store.postgres import conn as _pg_conn
from sagaway.store.postgres import open as _pg_open
from sagaway.store.postgres.conn import Conn, Op
from sagaway.store.postgres.url import Timing, parse_pooling, parse_postgres_url, parse_timing

if TYPE_CHECKING:
    from sagaway.store import notices
    from sagaway.store.postgres import listener as _pg_listener

T = TypeVar("T")

logger = logging.getLogger(__name__)
_Q = _pg_conn.Q
_DIALECT = "postgres"
_PROBE_EVERY = Timing().probe_interval
"""The default of ``Timing.probe_interval``, read when a store is made (a test may lower it)."""


class Connection:
    """The PostgreSQL store's pool and listening connections: ``open``/``close``, migrations,
    ``listen`` and ``_run``, which runs an operation as one transaction, retried when transient."""

    def __init__(self, url: str, *, create: bool = True) -> None:
        conninfo, schema, pool_size, display = parse_postgres_url(url)
        self.url = display
        self._create = create
        self.schema = schema
        self.pool_size = pool_size
        self.timing = parse_timing(url, Timing(probe_interval=_PROBE_EVERY))
        self._conninfo = conninfo
        self.pooling = parse_pooling(url)
        listen = self.pooling.listen_conninfo
        self._listen_conninfo: str | None = parse_postgres_url(listen)[0] if listen else None
        """Where the listeners connect: ``listen_url``, else the store's own URL unless it
        names a pooler in transaction mode (then None: no listener, the engine polls)."""
        if listen is None and not self.pooling.transaction:
            self._listen_conninfo = conninfo
        self._pool: _pg_conn.Pool | None = None
        self._listener: _pg_listener.Listener | None = None
        self._owner = ""  # the lease owner it listens as: told of no end it makes itself
        self.channel = ("sagaway_" + schema)[:63]
        """The LISTEN/NOTIFY channel of this schema's new work (see migrations 0003, 0016)."""
        self.runs_channel = ("sagaway:runs:" + schema)[:63]
        """Where every execution's end and cancel request is announced (migration 0016)."""
        self._runs_listener: _pg_listener.Listener | None = None
        self._said_polling = False

    # ------------------------------------------------------------------ lifecycle

    async def open(self) -> None:
        if self._pool is not None:
            return
        current = None
        if not self._create:  # reading: fail at once if there is no Sagaway schema here
            timeout = max(2, min(10, int(self.timing.pool_timeout)))
            current = await _pg_open.schema_version(
                self._conninfo, schema=self.schema, url=self.url, timeout=timeout
            )
        pool = await _pg_conn.open_pool(
            self._conninfo,
            schema=self.schema,
            size=self.pool_size,
            timing=self.timing,
            url=self.url,
            pooled=self.pooling.transaction,
        )
        self._pool = pool
        # An existing schema already at this Sagaway's version needs no migration transaction.
        if current == _migrations.latest_version(_DIALECT):
            return
        try:
            await self._run(self._migrate)
        except BaseException:
            self._pool = None
            await pool.close()
            raise

    @property
    def pool(self) -> _pg_conn.Pool:
        """The connection pool while the store is open (diagnostics; tests inject faults here)."""
        if self._pool is None:
            raise errors.ManagerStateError("the PostgreSQL store is not open")
        return self._pool

    async def close(self) -> None:
        for listener in (self._listener, self._runs_listener):
            if listener is not None:
                await listener.close()
        self._listener = self._runs_listener = None
        pool = self._pool
        if pool is None:
            return
        self._pool = None
        await pool.close()

    async def server_time(self) -> float | None:
        async def op(conn: Conn, retried: bool) -> float:
            row = await (await conn.execute(_Q["server_time"])).fetchone()
            assert row is not None
            return float(row[0])

        return await self._run(op, transaction=False)

    async def listen(
        self, callback: notices.Callback, *, owner: str | None = None, ends: bool = True
    ) -> None:
        """Call ``callback(notice)`` for every notice of this schema's channels.

        See ``_pg_listener.Listener``: ``Listening()`` once notices are known to arrive,
        ``Deaf()`` when they stop. Returns once notices are heard (or after a few seconds of
        not hearing them). ``owner``'s own channel brings the ends and cancel requests of what
        it owns; the others' come on a second connection, started at once with ``ends`` (or by
        a later call with it), which says ``Listening("ends")`` and ``Deaf("ends")``.
        """
        if self._listen_conninfo is None:
            if not self._said_polling:
                self._said_polling = True
                logger.info(
                    "%s names a pooler in transaction mode and no listen_url: no notifications,"
                    " the engine polls for changes",
                    self.url,
                    extra={"action": "listen"},
                )
            return
        from sagaway.store.postgres import listener as _pg_listener  # here: a reader never listens

        if self._listener is None:
            self._owner = owner or ""
            mine = () if owner is None else (_pg_listener.owner_channel(self.schema, owner),)
            self._listener = self._new_listener(self.channel, mine, "")
            await self._listener.start(callback)
        if ends and self._runs_listener is None:
            self._runs_listener = self._new_listener(self.runs_channel, (), "ends")
            await self._runs_listener.start(callback)

    def _new_listener(
        self, channel: str, also: tuple[str, ...], stream: notices.Stream
    ) -> _pg_listener.Listener:
        from sagaway.store.postgres import listener as _pg_listener

        assert self._listen_conninfo is not None
        return _pg_listener.Listener(
            self._listen_conninfo,
            channel=channel,
            also=also,
            stream=stream,
            url=self.url,
            probe_interval=self.timing.probe_interval,
            probe_timeout=self.timing.probe_timeout,
            reconnect_delay=self.timing.reconnect_delay,
            on_reconnect=self._wake_pool,
        )

    def _wake_pool(self) -> None:
        """The listener reconnected: have the pool check its connections now."""
        if self._pool is not None:
            self._pool.check_soon()

    async def _migrate(self, conn: Conn, retried: bool) -> None:
        # One transaction under an advisory lock keyed by the schema: processes that start at
        # once wait here, and the later ones find the schema already migrated.
        import hashlib  # here: an up-to-date schema (a reader's) is not migrated

        digest = hashlib.blake2b(f"sagaway.migrate:{self.schema}".encode(), digest_size=8)
        lock_key = int.from_bytes(digest.digest(), "big", signed=True)
        await conn.execute(_Q["migration_lock"], {"lock_key": lock_key})
        # The scripts name their tables unqualified: the path holds for this transaction only.
        await conn.execute(
            sql.SQL("SET LOCAL search_path TO {}").format(sql.Identifier(self.schema))
        )
        cur = await conn.execute(_Q["schema_exists"], {"schema": self.schema})
        if await cur.fetchone() is None:
            await conn.execute(
                sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(self.schema))
            )
        await conn.execute(_Q["create_schema_migrations"])
        cur = await conn.execute(_Q["schema_version"])
        row = await cur.fetchone()
        current = int(row[0]) if row else 0
        database = f"{self.url} (schema {self.schema})"
        for migration in _migrations.pending(_DIALECT, current, database):
            # A migration file is plain DDL without parameters, sent as one script (as bytes: it
            # is package data, not a string literal).
            await conn.execute(migration.sql.encode())
            await conn.execute(_Q["record_migration"], _migrations.record(migration))

    async def _run(self, op: Op[T], *, transaction: bool = True) -> T:
        """Run ``op(conn, retried)`` as one transaction, retrying transient failures (see
        ``_pg_conn.run``)."""
        return await _pg_conn.run(self._pool, op, transaction=transaction, url=self.url)
