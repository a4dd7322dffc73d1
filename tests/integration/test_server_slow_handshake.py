"""Opening a connection to an Engine Server that accepts the connection but answers slowly (a
busy or starting server): the handshake is asked again, a few times, instead of failing at the
first timeout; a port where nothing listens is still reported at once."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest

from sagaway.store import StoreUnavailable
from sagaway.store.remote import connection
from sagaway.store.remote.client import GrpcStore
from sagaway.store.remote.target import handshake_hint, parse_target
from tests.grpc_server import ServerProcess


class SlowProxy:
    """A TCP proxy to ``target`` that holds each of the first ``slow`` connections ``delay``
    seconds (reading nothing) before it passes bytes on: a server that connects but is slow to
    speak.

    It runs on threads with plain sockets, so that closing it closes every socket it ever opened
    before ``close()`` returns (an asyncio proxy could accept a connection after its teardown and
    leave a transport for the garbage collector to warn about in a later test)."""

    POLL = 0.05  # how often blocked threads look whether the proxy is closing

    def __init__(self, target: str, delay: float, slow: int = 1_000_000) -> None:
        host, port = target.rsplit(":", 1)
        self._upstream = (host, int(port))
        self._delay = delay
        self._slow = slow
        self._accepted = 0
        self._closing = threading.Event()
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self._threads: list[threading.Thread] = []
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(self.POLL)
        self.address = f"127.0.0.1:{self._listener.getsockname()[1]}"
        self._spawn(self._accept_loop)

    def _spawn(self, target: Callable[..., None], *args: object) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)
        with self._lock:
            if self._closing.is_set():
                return  # close() joins only the threads it saw
            self._threads.append(thread)
        thread.start()

    def _keep(self, sock: socket.socket) -> bool:
        """Track ``sock`` for closing; close it at once (and say so) if the proxy is closing."""
        with self._lock:
            if not self._closing.is_set():
                sock.settimeout(self.POLL)
                self._sockets.append(sock)
                return True
        sock.close()
        return False

    def _accept_loop(self) -> None:
        while not self._closing.is_set():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self._accepted += 1
            if self._keep(conn):
                self._spawn(self._link, conn, self._accepted <= self._slow)

    def _link(self, conn: socket.socket, slow: bool) -> None:
        if slow and self._closing.wait(self._delay):
            return
        try:
            upstream = socket.create_connection(self._upstream, timeout=5)
        except OSError:
            return
        if self._keep(upstream):
            self._spawn(self._pump, conn, upstream)
            self._pump(upstream, conn)

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        while not self._closing.is_set():
            try:
                data = source.recv(65536)
            except TimeoutError:
                continue
            except OSError:
                return
            if not data:
                with contextlib.suppress(OSError):
                    sink.shutdown(socket.SHUT_WR)
                return
            try:
                sink.sendall(data)
            except OSError:
                return

    def close(self) -> None:
        with self._lock:
            self._closing.set()
            threads = list(self._threads)
        for thread in threads:
            thread.join(10)
        self._listener.close()
        for sock in self._sockets:
            sock.close()


@contextlib.asynccontextmanager
async def slow_proxy(target: str, delay: float, slow: int = 1_000_000) -> AsyncIterator[str]:
    """A :class:`SlowProxy` for the length of the block (closed on a thread, so that the test's
    loop goes on serving the client while the proxy's threads wind down)."""
    proxy = SlowProxy(target, delay, slow)
    try:
        yield proxy.address
    finally:
        await asyncio.to_thread(proxy.close)


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
