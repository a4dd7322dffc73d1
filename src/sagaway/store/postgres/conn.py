"""How the PostgreSQL store talks to the server: a connection pool whose reconnection attempts
are paced, every operation run as one transaction retried through transient failures, and the
named queries of ``sql/postgres.sql``.

Outages: while the server is unreachable a statement waits up to ``pool_timeout`` seconds for
a connection, then fails with ``StoreUnavailable``. The pool tries to reconnect at most
``reconnect_delay`` seconds apart (psycopg_pool alone doubles its pause up to a minute, so work
would stall for about as long as the outage again after the server is back), and the listener's
reconnection makes the pool look again at once (see ``postgres.listener``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable, Collection
from typing import Any, Protocol, TypeVar

import psycopg
import pydantic_core
from psycopg.rows import DictRow, TupleRow, dict_row
from psycopg_pool import AsyncConnectionPool, PoolClosed, PoolTimeout
from psycopg_pool.pool_async import AddConnection, MaintenanceTask

from sagaway import errors, observe
from sagaway._tasks import cancel_and_wait
from sagaway.store.contract import StoreUnavailable
from sagaway.store.postgres import qualify as _qualify
from sagaway.store.postgres.url import Timing
from sagaway.store.sql import queries

T = TypeVar("T")
logger = logging.getLogger(__name__)
Conn = psycopg.AsyncConnection[TupleRow]
Op = Callable[[Conn, bool], Awaitable[T]]
"""``op(conn, retried)``: the work of one transaction (see ``run``)."""
Params = dict[str, Any]

Q = queries("postgres")
"""The named queries of the PostgreSQL dialect."""

_ATTEMPTS = 4
"""Tries of one transaction when it fails with a transient (operational) error."""
_BACKOFF = 0.05
"""Seconds before the first retry; doubles each time."""


class Run(Protocol):
    """A store's ``_run``: ``run`` on its pool."""

    def __call__(self, op: Op[T], /, *, transaction: bool = ...) -> Awaitable[T]: ...


class Pool(AsyncConnectionPool[Conn]):
    """psycopg's pool, with reconnection attempts at most ``reconnect_delay`` seconds apart,
    and a check of its connections on demand (``check_soon``).

    psycopg_pool doubles the pause after each failed attempt (1, 2, 4, ... 60 s and more): after
    a long outage its next attempt can come a minute after the server is back, and every
    statement waits for it.
    """

    def __init__(
        self, conninfo: str, *, schema: str, url: str, reconnect_delay: float, **kwargs: Any
    ) -> None:
        super().__init__(conninfo, name=f"sagaway:{schema}", **kwargs)
        self._schema = schema
        self._url = url
        self._reconnect_delay = reconnect_delay
        self._checking: asyncio.Task[None] | None = None

    last_connect_error: str | None = None
    """Why the last attempt to open a connection failed; None once one succeeded."""

    async def _connect(self, timeout: float | None = None) -> Conn:
        try:
            conn = await super()._connect(timeout)
        except Exception as exc:
            self.last_connect_error = " ".join(str(exc).split())
            raise
        self.last_connect_error = None
        return conn

    async def schedule_task(self, task: MaintenanceTask, delay: float) -> None:
        # Only reconnections: the pool also schedules its shrinking, max_idle apart.
        if isinstance(task, AddConnection):
            delay = min(delay, self._reconnect_delay)
        await super().schedule_task(task, delay)

    def check_soon(self) -> None:
        """Check the connections now, in a task: replace those an outage broke, connect if none
        (the listener reconnected: the server is back). One check at a time."""
        if self._checking is not None and not self._checking.done():
            return
        name = f"sagaway-pool-check:{self._schema}"
        self._checking = asyncio.create_task(self._check_quietly(), name=name)

    async def _check_quietly(self) -> None:
        try:
            await self.check()
        except Exception as exc:  # the next statement finds out again
            logger.info("checking the pool of %s failed: %s", self._url, exc)

    async def close(self, timeout: float = 5.0) -> None:
        check, self._checking = self._checking, None
        await cancel_and_wait(check)
        await super().close(timeout)


async def open_pool(
    conninfo: str, *, schema: str, size: int, timing: Timing, url: str, pooled: bool = False
) -> Pool:
    """An open pool of autocommit connections whose statements name ``schema``'s tables
    (``qualify``): nothing is set on a connection that a later transaction relies on.

    ``pooled`` (the URL names a pooler in transaction mode), or a pooler found between here
    and the server (``_through_a_pooler``): no statement is prepared on the server either,
    since its next execution may reach another server connection, or another client's
    statement of the same name.
    """
    unprepared = [pooled]

    async def configure(conn: Conn) -> None:
        if unprepared[0]:
            conn.prepare_threshold = None

    kwargs: dict[str, Any] = {"autocommit": True, "cursor_factory": _qualify.cursor_class(schema)}
    pool = Pool(
        conninfo,
        schema=schema,
        url=url,
        reconnect_delay=timing.reconnect_delay,
        min_size=1,
        max_size=size,
        timeout=timing.pool_timeout,
        kwargs=kwargs,
        configure=configure,
        open=False,
    )
    try:
        await pool.open(wait=True)
    except PoolTimeout as exc:
        await pool.close()
        raise errors.SagawayError(f"cannot connect to PostgreSQL at {url}: {exc}") from exc
    if not pooled:
        conn = await pool.getconn()
        try:
            if await _through_a_pooler(conn):
                unprepared[0] = True
                conn.prepare_threshold = None
                logger.warning(
                    "%s reaches PostgreSQL through a connection pooler (the server process "
                    "differs from the one the connection was opened with): statements are not "
                    "prepared on the server; with a pooler in transaction mode add "
                    "pooler=transaction to the URL (and listen_url= for notifications)",
                    url,
                    extra={"action": "open"},
                )
        finally:
            await pool.putconn(conn)
    return pool


async def _through_a_pooler(conn: Conn) -> bool:
    """Whether a pooler stands between ``conn`` and the server: the server process that runs
    its statement is not the one whose id the connection was given when it was opened (a
    pooler gives its clients ids of its own, to route their cancel requests)."""
    try:
        row = await (await conn.execute("SELECT pg_backend_pid()")).fetchone()
    except psycopg.Error:
        return False  # the next statement finds out
    return row is not None and int(row[0]) != conn.info.backend_pid


async def run(
    pool: AsyncConnectionPool[Conn] | None, op: Op[T], *, transaction: bool, url: str
) -> T:
    """Run ``op(conn, retried)`` as one transaction, retrying transient failures.

    ``retried`` is true when an earlier attempt failed: it may have committed anyway (a lost
    acknowledgement), and ``op`` must then give the answer the first attempt would have.
    Single-statement ops pass ``transaction=False``: on an autocommit connection the
    statement is its own transaction, without BEGIN/COMMIT round trips.
    """
    if pool is None:
        raise errors.ManagerStateError("the PostgreSQL store is not open")
    attempt = 0
    while True:
        try:
            # getconn/putconn rather than pool.connection(): the same for these autocommit
            # connections (putconn rolls back one left inside a transaction and replaces one
            # left broken), without a generator-based context manager on every statement.
            conn = await connection(pool, url)
            try:
                if not transaction:
                    return await op(conn, attempt > 0)
                async with conn.transaction():
                    return await op(conn, attempt > 0)
            finally:
                await pool.putconn(conn)
        except PoolClosed as exc:
            raise errors.ManagerStateError("the PostgreSQL store is closed") from exc
        except PoolTimeout as exc:
            raise StoreUnavailable(f"no PostgreSQL connection available for {url}: {exc}") from exc
        except psycopg.OperationalError as exc:
            attempt += 1
            if attempt >= _ATTEMPTS:
                raise StoreUnavailable(f"PostgreSQL transaction failed on {url}: {exc}") from exc
            # Other idle connections may be dead too (server restart): replace them.
            with contextlib.suppress(Exception):
                await pool.check()
            await asyncio.sleep(_BACKOFF * 2 ** (attempt - 1))


WAIT_REPORTED_AFTER = 1.0
"""Seconds a statement waits for a pooled connection before the wait is logged."""
_REPORT_EVERY = 10.0
"""Seconds between two warnings of one pool that statements are waiting."""


async def connection(pool: AsyncConnectionPool[Conn], url: str) -> Conn:
    """A connection of ``pool``: at once when one is idle; else the statement waits (up to the
    pool's ``timeout``, ``pool_timeout``, then ``PoolTimeout``), and a wait over
    ``WAIT_REPORTED_AFTER`` seconds is logged (``_still_waiting``) and reported
    (``observe.connection_waited``) instead of failing the workflow."""
    loop = asyncio.get_running_loop()
    began = loop.time()
    late = loop.call_later(WAIT_REPORTED_AFTER, _still_waiting, pool, url)
    try:
        conn = await pool.getconn()
    finally:
        late.cancel()
    waited = loop.time() - began
    if waited >= WAIT_REPORTED_AFTER:
        observe.connection_waited(waited)
        logger.info(
            "got a PostgreSQL connection to %s after waiting %.1fs",
            url,
            waited,
            extra={"action": "connection_wait"},
        )
    return conn


_warned_at: dict[str, float] = {}
"""When each pool (by name) last warned of waiting statements (``loop.time()``)."""


def _still_waiting(pool: AsyncConnectionPool[Conn], url: str) -> None:
    now = asyncio.get_running_loop().time()
    if now - _warned_at.get(pool.name, -_REPORT_EVERY) < _REPORT_EVERY:
        return
    _warned_at[pool.name] = now
    stats = pool.get_stats()
    held, waiting = stats.get("pool_size", 0), stats.get("requests_waiting", 0)
    refused = getattr(pool, "last_connect_error", None)
    if refused is not None:
        why = (
            f"the pool cannot open a connection ({refused}): the server is unreachable or "
            "refuses new connections (its max_connections, or the role's CONNECTION LIMIT, "
            "reached?)"
        )
    else:
        why = (
            f"all {held} connections of this process's pool (pool_size={pool.max_size}) are "
            "in use; raise pool_size (and the server's max_connections) or lower the "
            "concurrency"
        )
    logger.warning(
        "statements wait over %.0fs for a PostgreSQL connection to %s (%d waiting): %s; "
        "each waits up to pool_timeout=%gs, then the work is retried later",
        WAIT_REPORTED_AFTER,
        url,
        waiting,
        why,
        pool.timeout,
        extra={"action": "connection_wait"},
    )


async def named(conn: Conn, query: str, params: Params) -> list[DictRow]:
    """The rows of the named query ``query``, read by column name (see ``_rows``)."""
    return await dict_rows(conn, Q[query], params)


async def dict_rows(conn: Conn, text: str, params: Params) -> list[DictRow]:
    """The rows of the statement ``text`` (fixed fragments, values bound), by column name."""
    cur = conn.cursor(row_factory=dict_row)
    await cur.execute(text, params)
    return await cur.fetchall()


async def exists(conn: Conn, query: str, params: Params) -> bool:
    """Whether the named query ``query`` returns a row."""
    cur = await conn.execute(Q[query], params)
    return await cur.fetchone() is not None


def json_list(values: Collection[str]) -> str:
    """Many strings as one JSON parameter (read with ``json_array_elements_text``): psycopg
    adapts a list element by element, which cost more than the rest of an empty claim."""
    return pydantic_core.to_json(list(values)).decode()


def json_batch(rows: list[Params]) -> str:
    """The one JSON parameter of a batched statement (``json_to_recordset``)."""
    # pydantic-core's encoder: a few times faster than json's on every batch, and floats
    # written the same way (shortest text that reads back the same).
    data = pydantic_core.to_json(rows)
    if b"NaN" in data or b"Infinity" in data:
        # NaN/Infinity are not JSON (or the words are in a text): json decides, and refuses
        # them; the batch is then written item by item, where plain parameters carry them.
        return json.dumps(rows, allow_nan=False)
    return data.decode()
