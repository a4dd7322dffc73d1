"""A TCP proxy in front of PostgreSQL whose faults a test switches on and off.

The shared PostgreSQL server must never be stopped (other tests use it), so database failures
are made between the client and the server, where a network or a restart makes them:

- ``outage()``: every open connection is cut and new ones are closed as soon as they arrive
  (the server is down), until ``restore()``;
- ``blackhole()``: every connection, open or new, swallows what is sent and delivers nothing
  (a silently dead peer: no reset, no reply), until ``restore()`` (which cuts those
  connections, as a recovered network would find them gone);
- ``lose_next_commit_ack()``: the next server reply to a ``COMMIT`` is not delivered and its
  connection is cut, so the transaction committed but the client never hears it (a lost
  acknowledgement).

Each fault is switched on explicitly and reports what it did through events and counters, so a
test waits for the fault to have happened instead of sleeping and hoping.

Connect through :meth:`PgProxy.url`: it disables SSL and GSS negotiation so every byte the
server sends is a typed protocol message the proxy can follow.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import urllib.parse


class Mode(enum.Enum):
    FORWARD = "forward"
    OUTAGE = "outage"
    BLACKHOLE = "blackhole"


class _Link:
    """One client connection and its server connection."""

    def __init__(self, client: asyncio.StreamWriter) -> None:
        self.client = client
        self.server: asyncio.StreamWriter | None = None
        self.blackholed = False
        self.tasks: list[asyncio.Task[None]] = []

    def cut(self) -> None:
        # abort(): no orderly shutdown, as when a server process dies.
        for writer in (self.client, self.server):
            if writer is not None:
                writer.transport.abort()


class PgProxy:
    """Forwards 127.0.0.1:<port> to a PostgreSQL server, with faults on demand."""

    def __init__(self, target_url: str) -> None:
        parts = urllib.parse.urlsplit(target_url)
        self._target_url = target_url
        self._target_host = parts.hostname or "127.0.0.1"
        self._target_port = parts.port or 5432
        self._server: asyncio.Server | None = None
        self._links: set[_Link] = set()
        self.mode = Mode.FORWARD
        self.refused = 0
        """Connections closed on arrival during an outage."""
        self.refusal = asyncio.Event()
        """Set at each refused connection (clear it to wait for the next)."""
        self._lose_ack: asyncio.Event | None = None

    async def __aenter__(self) -> PgProxy:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._server is not None:
            self._server.close()
        for link in list(self._links):
            link.cut()
            for task in link.tasks:
                task.cancel()
        if self._server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 5)

    @property
    def port(self) -> int:
        assert self._server is not None, "use the proxy as an async context manager"
        port: int = self._server.sockets[0].getsockname()[1]
        return port

    def url(self, url: str | None = None) -> str:
        """``url`` (default: the target) pointed at the proxy, SSL/GSS negotiation off."""
        parts = urllib.parse.urlsplit(url or self._target_url)
        user_info, at, _ = parts.netloc.rpartition("@")
        netloc = f"{user_info}{at}127.0.0.1:{self.port}"
        query = "&".join(filter(None, [parts.query, "sslmode=disable&gssencmode=disable"]))
        return urllib.parse.urlunsplit(parts._replace(netloc=netloc, query=query))

    # ------------------------------------------------------------------ faults

    def outage(self) -> None:
        """Cut every connection and close new ones on arrival, until ``restore()``."""
        self.mode = Mode.OUTAGE
        for link in list(self._links):
            link.cut()

    def blackhole(self) -> None:
        """Swallow every byte both ways on all connections, open and new, until ``restore()``."""
        self.mode = Mode.BLACKHOLE
        for link in self._links:
            link.blackholed = True

    def restore(self) -> None:
        """Forward again; black-holed connections are cut (they stay dead for their peers)."""
        self.mode = Mode.FORWARD
        for link in list(self._links):
            if link.blackholed:
                link.cut()

    def lose_next_commit_ack(self) -> asyncio.Event:
        """Cut the connection that next receives a reply to COMMIT, without delivering it.

        The returned event is set once that has happened.
        """
        self._lose_ack = asyncio.Event()
        return self._lose_ack

    # ------------------------------------------------------------------ plumbing

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.mode is Mode.OUTAGE:
            self.refused += 1
            self.refusal.set()
            writer.transport.abort()
            return
        link = _Link(writer)
        link.blackholed = self.mode is Mode.BLACKHOLE
        self._links.add(link)
        try:
            server_reader, link.server = await asyncio.open_connection(
                self._target_host, self._target_port
            )
        except OSError:
            link.cut()
            self._links.discard(link)
            return
        upstream = asyncio.ensure_future(self._pump(reader, link.server, link))
        link.tasks = [task for task in (asyncio.current_task(), upstream) if task is not None]
        try:
            await self._pump_replies(server_reader, writer, link)
        finally:
            upstream.cancel()
            with contextlib.suppress(BaseException):
                await upstream
            link.cut()
            self._links.discard(link)

    async def _pump(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, link: _Link
    ) -> None:
        with contextlib.suppress(OSError, ConnectionError):
            while data := await reader.read(65536):
                if link.blackholed:
                    continue
                writer.write(data)
                await writer.drain()
        link.cut()

    async def _pump_replies(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, link: _Link
    ) -> None:
        """Forward the server's messages one whole message at a time, watching for COMMIT."""
        buffer = b""
        with contextlib.suppress(OSError, ConnectionError):
            while data := await reader.read(65536):
                if link.blackholed:
                    continue
                buffer += data
                ready = 0  # bytes of whole messages before any lost acknowledgement
                while len(buffer) - ready >= 5:
                    length = int.from_bytes(buffer[ready + 1 : ready + 5], "big")
                    end = ready + 1 + length
                    if end > len(buffer):
                        break
                    kind, body = buffer[ready : ready + 1], buffer[ready + 5 : end]
                    lose = self._lose_ack
                    if lose is not None and kind == b"C" and body == b"COMMIT\x00":
                        # Committed on the server; the client never hears of it.
                        self._lose_ack = None
                        writer.write(buffer[:ready])
                        link.cut()
                        lose.set()
                        return
                    ready = end
                writer.write(buffer[:ready])
                buffer = buffer[ready:]
                await writer.drain()
