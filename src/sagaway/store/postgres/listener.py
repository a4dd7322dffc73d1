"""The LISTEN connection of a PostgreSQL store: notices from other processes, and whether they
arrive at all.

One dedicated connection, outside the pool, reconnecting with backoff. Whether notices arrive
is never assumed: the listener sends itself a probe notice and counts on notices only once it
has come back (a pooler in transaction mode lets LISTEN succeed and then delivers nothing).
It probes again every ``probe_interval`` seconds, so a connection that silently stopped
delivering is found out by the next probe.

A dead peer (a black-holed socket: bytes accepted, nothing delivered, no reset) answers neither
a statement nor the cancel request psycopg sends when the statement is abandoned, and psycopg
waits for both. So nothing here is abandoned by cancelling: when the probe is not back within
``probe_timeout`` the socket is shut down, every wait on it ends at once with an
OperationalError, and the listener reconnects.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import socket
import uuid
from collections.abc import Callable

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg.rows import TupleRow

from sagaway._tasks import cancel_and_wait
from sagaway.store import notices

logger = logging.getLogger(__name__)
Conn = psycopg.AsyncConnection[TupleRow]

_PROBE_WAIT = 2.0
"""Seconds the listener waits for its first probe notice before it reports notices missing."""
_LISTEN_DEFAULTS = {
    "keepalives": 1,
    "keepalives_idle": 30,
    "keepalives_interval": 10,
    "connect_timeout": 10,
}
"""libpq options of the notification connection unless the URL sets them: TCP keepalives (it
sits idle), and a bound on reconnecting through a network that drops what it is sent."""


class Listener:
    """Passes the notices of its channels to a callback, and says when they can be counted on.

    ``Listening(stream)`` once a probe notice it sent itself has come back (notices sent
    before that are lost: look again), ``Deaf(stream)`` when the connection drops or a later
    probe goes unanswered; every other notice as it comes (one it cannot read is logged and
    dropped: ``notices.decode``).
    """

    def __init__(
        self,
        conninfo: str,
        *,
        channel: str,
        also: tuple[str, ...] = (),
        stream: notices.Stream = "",
        url: str,
        probe_interval: float,
        probe_timeout: float,
        reconnect_delay: float,
        on_reconnect: Callable[[], None],
    ) -> None:
        self._conninfo = conninfo
        self.channel = channel
        """Where probes go; notices of the ``also`` channels are passed on too."""
        self._channels = (channel, *also)
        self._stream: notices.Stream = stream
        """What its ``Listening``/``Deaf`` speak of (a store may run two listeners)."""
        self._url = url
        self._probe_interval = probe_interval
        self._probe_timeout = probe_timeout
        self._reconnect_delay = reconnect_delay
        self._on_reconnect = on_reconnect
        """Called when a connection is made again after one was lost: the server is back."""
        self._task: asyncio.Task[None] | None = None
        self._conn: Conn | None = None
        self._heard = False
        """Whether a probe came back on the current connection (notices can be counted on)."""
        self._warned = False
        """Whether the warning that notices do not arrive was logged (once per listener)."""

    async def start(self, callback: notices.Callback) -> None:
        """Start listening; returns once notices are heard (or after a few seconds without)."""
        if self._task is not None:
            return
        listening: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._task = asyncio.create_task(
            self._listen(callback, listening), name=f"sagaway-listen:{self.channel}"
        )
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(listening), _PROBE_WAIT + 5.0)

    async def close(self) -> None:
        task, self._task = self._task, None
        if task is None:
            return
        if self._conn is not None:
            # Its peer may be dead: a cancelled statement would wait for a cancel request it
            # never answers. With the socket shut down every wait on it ends at once.
            shut_down(self._conn)
        await cancel_and_wait(task)

    async def _listen(self, callback: notices.Callback, listening: asyncio.Future[None]) -> None:
        delay = 0.1
        reconnecting = False
        while True:
            self._heard = False
            conn: Conn | None = None
            try:
                conn = self._conn = await self._connect()
                async with conn:
                    await self._start_listening(conn)
                    delay = 0.1
                    if reconnecting:
                        self._on_reconnect()
                    await self._serve(conn, callback, listening)
            except (psycopg.Error, TimeoutError) as exc:
                logger.warning(
                    "notification connection to %s lost (%s); reconnecting in %.1fs",
                    self._url,
                    exc,
                    delay,
                    extra={"action": "listen"},
                )
            finally:
                self._conn = None
                if conn is not None:
                    conn.pgconn.finish()  # a connection found broken is not closed by psycopg
                if self._heard:
                    callback(notices.Deaf(self._stream))
            reconnecting = True
            await asyncio.sleep(delay)
            delay = min(delay * 2, self._reconnect_delay)

    async def _connect(self) -> Conn:
        given = conninfo_to_dict(self._conninfo)
        conninfo = make_conninfo(
            self._conninfo, **{k: v for k, v in _LISTEN_DEFAULTS.items() if k not in given}
        )
        return await psycopg.AsyncConnection.connect(conninfo, autocommit=True)

    async def _start_listening(self, conn: Conn) -> None:
        """LISTEN on the channels; the socket is shut down if that takes ``probe_timeout``."""
        guard = asyncio.get_running_loop().call_later(self._probe_timeout, shut_down, conn)
        try:
            for name in self._channels:
                await conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(name)))
        finally:
            guard.cancel()

    async def _serve(
        self, conn: Conn, callback: notices.Callback, listening: asyncio.Future[None]
    ) -> None:
        """Pass the notices of ``conn`` on, probing it every ``probe_interval``, until a probe
        that used to come back does not (raises ``OperationalError``) or the connection fails.

        ``listening`` is set after the first round; ``self._heard`` once a probe came back.
        """
        seconds = _PROBE_WAIT
        while True:
            answered = await self._listen_round(conn, callback, seconds, not self._heard)
            seconds = self._probe_interval
            if answered and not self._heard:
                self._heard = True
                callback(notices.Listening(self._stream))
            if not listening.done():
                listening.set_result(None)
            if answered:
                continue
            if self._heard:
                raise psycopg.OperationalError("a probe notice did not come back")
            if not self._warned:
                self._warned = True
                logger.warning(
                    "notifications on %s do not arrive (a connection pooler in "
                    "transaction mode?); polling instead",
                    self._url,
                    extra={"action": "listen"},
                )

    async def _listen_round(
        self, conn: Conn, callback: notices.Callback, seconds: float, first: bool
    ) -> bool:
        """Send a probe notice and pass on every other notice for ``seconds`` (``first``: only
        until the probe is back); True if it came back.

        The socket is shut down if the probe's statement is not done within ``probe_timeout``,
        or, on a connection that has delivered notices (not ``first``), the probe is not back.
        """
        probe = notices.Probe(uuid.uuid4().hex)
        answered = False
        guard = asyncio.get_running_loop().call_later(self._probe_timeout, shut_down, conn)
        try:
            async with asyncio.timeout(seconds + 10.0):  # a last resort
                await self._send_probe(conn, probe)
                if first:
                    guard.cancel()  # notices never heard yet: a missing probe is no sign of death
                # aclosing: the generator holds the connection's lock until it is closed.
                async with contextlib.aclosing(conn.notifies(timeout=seconds)) as notes:
                    async for note in notes:
                        notice = notices.decode(note.payload)
                        if notice == probe:
                            answered = True
                            guard.cancel()
                            if first:
                                break
                        elif notice is not None and not isinstance(notice, notices.Probe):
                            callback(notice)  # others' probes are not ours
        finally:
            guard.cancel()
        return answered

    async def _send_probe(self, conn: Conn, probe: notices.Probe) -> None:
        """Send ``probe``: on ``conn`` once notices are heard on it, else from a connection of
        its own.

        A notice a session sends itself proves nothing about the others': behind a pooler in
        transaction mode the probe's transaction runs on the server connection that holds the
        LISTEN, which delivers its own notice before handing the connection back, while every
        other process's notice reaches that server connection when no client is linked to it
        and is dropped (PgBouncer: "got packet 'A' from server when not linked"). So until a
        probe has come back, it is sent by another session, as any other notice is.
        """
        params = (self.channel, notices.encode(probe))
        if self._heard:
            await conn.execute("SELECT pg_notify(%s, %s)", params)
            return
        async with await self._connect() as other:
            await other.execute("SELECT pg_notify(%s, %s)", params)


def owner_channel(schema: str, owner: str) -> str:
    """The channel of the ends and cancel requests of what ``owner`` holds (migration 0016)."""
    digest = hashlib.md5(f"{schema}/{owner}".encode(), usedforsecurity=False).hexdigest()
    return f"sagaway:owner:{digest}"


def shut_down(conn: Conn) -> None:
    """End every wait on ``conn``'s socket now (it reads end-of-file).

    Shut down, not closed: the descriptor stays ours until psycopg closes the connection, so
    its number cannot pass to another socket while a wait still watches it.
    """
    with contextlib.suppress(OSError, psycopg.Error):
        sock = socket.socket(fileno=conn.pgconn.socket)
        try:
            sock.shutdown(socket.SHUT_RDWR)
        finally:
            sock.detach()
