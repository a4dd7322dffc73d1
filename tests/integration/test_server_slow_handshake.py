"""Opening a connection to an Engine Server that accepts the connection but answers slowly (a
busy or starting server): the handshake is asked again, a few times, instead of failing at the
first timeout; a port where nothing listens is still reported at once."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from sagaway.store import StoreUnavailable
from sagaway.store.remote import connection
from sagaway.store.remote.client import GrpcStore
from sagaway.store.remote.target import handshake_hint, parse_target
from tests.grpc_server import ServerProcess


@contextlib.asynccontextmanager
async def slow_proxy(target: str, delay: float, slow: int = 1_000_000) -> AsyncIterator[str]:
    """A TCP proxy to ``target`` that holds each of the first ``slow`` connections ``delay``
    seconds (reading nothing) before it passes bytes on: a server that connects but is slow to
    speak."""
    host, port = target.rsplit(":", 1)
    accepted = 0
    links: set[asyncio.Task[None]] = set()
    writers: list[asyncio.StreamWriter] = []

    async def pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError, asyncio.CancelledError):
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        writer.close()

    async def link(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal accepted
        accepted += 1
        try:
            if accepted <= slow:
                await asyncio.sleep(delay)
            up_reader, up_writer = await asyncio.open_connection(host, int(port))
            writers.append(up_writer)
            try:
                await asyncio.gather(pump(reader, up_writer), pump(up_reader, writer))
            finally:
                await _closed(up_writer)
        finally:
            await _closed(writer)

    def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writers.append(writer)
        task = asyncio.create_task(link(reader, writer))
        links.add(task)
        task.add_done_callback(links.discard)

    server = await asyncio.start_server(accept, "127.0.0.1", 0)
    address = server.sockets[0].getsockname()
    try:
        yield f"{address[0]}:{address[1]}"
    finally:
        server.close()
        for task in list(links):
            task.cancel()
        await asyncio.gather(*links, return_exceptions=True)
        for writer in writers:  # every socket closed before the test's loop ends
            await _closed(writer)
        server.close()
        await server.wait_closed()


async def _closed(writer: asyncio.StreamWriter) -> None:
    """Close ``writer`` and wait until its socket is closed (before the test's loop ends)."""
    writer.close()
    with contextlib.suppress(ConnectionError, asyncio.CancelledError):
        await writer.wait_closed()


@pytest.fixture
def served(tmp_path: Path) -> Iterator[ServerProcess]:
    with ServerProcess(f"sqlite:///{tmp_path / 'db.sqlite'}") as server:
        yield server


async def test_a_slow_handshake_is_asked_again(
    served: ServerProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(connection, "CONNECT_TIMEOUT", 0.5)
    async with slow_proxy(served.address, delay=30, slow=1) as address:
        store = GrpcStore(f"grpc://{address}")
        await store.open()  # the first handshake times out; the second is answered
        try:
            assert store.server_info is not None
            assert await store.get_workflow("nothing-here") is None
        finally:
            await store.close()


ASKED_AGAIN = "slow to answer; asking again"


async def test_a_server_too_slow_for_every_attempt_is_reported(
    served: ServerProcess, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(connection, "CONNECT_TIMEOUT", 0.2)
    caplog.set_level(logging.INFO, logger="sagaway.store.remote.connection")
    async with slow_proxy(served.address, delay=30) as address:
        with pytest.raises(StoreUnavailable, match=f"cannot reach the Engine Server at {address}"):
            await GrpcStore(f"grpc://{address}").open()
    asked_again = [r for r in caplog.records if ASKED_AGAIN in r.getMessage()]
    assert len(asked_again) == connection.HELLO_ATTEMPTS - 1


async def test_nothing_listening_is_reported_at_once(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(connection, "CONNECT_TIMEOUT", 5.0)
    caplog.set_level(logging.INFO, logger="sagaway.store.remote.connection")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # free, and closed again: nothing listens there
    began = time.monotonic()
    with pytest.raises(StoreUnavailable):
        await GrpcStore(f"grpc://127.0.0.1:{port}").open()
    assert time.monotonic() - began < 5.0  # one attempt, not three timeouts
    assert not [r for r in caplog.records if ASKED_AGAIN in r.getMessage()]


def test_a_tcp_connect_cut_short_is_slow_not_tls() -> None:
    # What gRPC says when the TCP connect outlived the call's deadline on a busy machine: a
    # slow server to ask again, not a TLS mismatch.
    details = (
        "cannot reach the Engine Server at 127.0.0.1:1: failed to connect to all addresses; "
        "last error: UNKNOWN: ipv4:127.0.0.1:1: tcp handshaker shutdown"
    )
    assert connection._slow(details)
    assert handshake_hint(parse_target("grpc://127.0.0.1:1"), details) is None
    assert not connection._slow("failed to connect to all addresses; Connection refused")
