"""Run the Engine Server: open the store, serve ``sagaway.v1.Engine`` and health, stop gracefully.

``serve`` returns when ``stop`` is set: it stops taking calls, lets the calls in flight finish
(``grace`` seconds at most), ends the Watch streams, closes the store.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import math
from collections.abc import Callable
from pathlib import Path

import grpc
import grpc.aio
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from sagaway import credentials, serialization
from sagaway.server.auth import Gate, TokenAuth
from sagaway.server.checks import WireGuard, max_request_bytes
from sagaway.server.clock import DEFAULT_MAX_LEASE, ServerClock
from sagaway.server.notices import Hub
from sagaway.server.service import EngineService
from sagaway.store import open_store
from sagaway.store.remote.target import CHANNEL_KEEPALIVE_MS
from sagaway.v1 import engine_pb2_grpc as pb_grpc

logger = logging.getLogger("sagaway.server")
SERVICE_NAME = "sagaway.v1.Engine"


@dataclasses.dataclass(frozen=True, kw_only=True)
class ServerConfig:
    """What ``sagaway server`` was told."""

    url: str
    """The database the server holds (``sqlite:///…`` or ``postgresql://…``)."""
    listen: str = "127.0.0.1:7233"
    token: str | None = None
    """The single token: the principal ``default``, with every role."""
    tokens_file: Path | None = None
    """Named tokens and client certificates with their roles (``sagaway.credentials``)."""
    tls_cert: Path | None = None
    tls_key: Path | None = None
    tls_client_ca: Path | None = None
    """Require clients to present a certificate signed by this CA (mutual TLS)."""
    payload_limit: int = serialization.DEFAULT_PAYLOAD_LIMIT
    max_lease: float = DEFAULT_MAX_LEASE
    """Seconds: the longest lease a client may take or renew (longer requests are shortened)."""
    trust_client_clock: bool = False
    """Act at the ``now`` clients send (tests driving time with a fake clock), not the server's."""
    grace: float = 10.0
    """Seconds calls in flight get to finish when the server stops."""

    def __post_init__(self) -> None:
        if (self.tls_cert is None) != (self.tls_key is None):
            raise ValueError("TLS needs both --tls-cert and --tls-key")
        if self.tls_client_ca is not None and self.tls_cert is None:
            raise ValueError("--tls-client-ca (mutual TLS) needs --tls-cert and --tls-key")
        if not (math.isfinite(self.max_lease) and self.max_lease > 0):
            raise ValueError("--max-lease must be a positive number of seconds")
        if self.token is not None and not self.token.strip():
            raise ValueError("the token is empty")

    def load_credentials(self) -> credentials.Credentials | None:
        """Who may call, read now from the tokens file and the single token (None: no token
        is asked for); ``credentials.TokensFileError`` (a ValueError) when unfit."""
        found = credentials.combine(
            credentials.load(self.tokens_file) if self.tokens_file else None, self.token
        )
        if found is not None and found.certificates and self.tls_client_ca is None:
            raise credentials.TokensFileError(
                f"{self.tokens_file}: [[certificate]] entries need mutual TLS: start the server "
                "with --tls-client-ca (and --tls-cert, --tls-key)"
            )
        return found

    def gate(self) -> Gate:
        """The door of a server with this configuration (``Gate.replace`` to reload it)."""
        return Gate(self.load_credentials(), mutual_tls=self.tls_client_ca is not None)


def _read(path: Path, what: str) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise ValueError(f"cannot read the {what} {str(path)!r}: {exc.strerror or exc}") from None


def _bind(server: grpc.aio.Server, config: ServerConfig) -> int:
    try:
        return _add_port(server, config)
    except RuntimeError:  # grpcio raises this (older releases returned 0) when it cannot bind
        return 0


def _add_port(server: grpc.aio.Server, config: ServerConfig) -> int:
    if config.tls_cert is None or config.tls_key is None:
        return server.add_insecure_port(config.listen)
    credentials = grpc.ssl_server_credentials(
        [(_read(config.tls_key, "TLS key"), _read(config.tls_cert, "TLS certificate"))],
        root_certificates=(
            _read(config.tls_client_ca, "client CA") if config.tls_client_ca else None
        ),
        require_client_auth=config.tls_client_ca is not None,
    )
    return server.add_secure_port(config.listen, credentials)


def _options(payload_limit: int) -> list[tuple[str, int]]:
    # The largest message carries two payloads (a workflow's result and the step recording
    # it); each payload is checked against the limit itself (RESOURCE_EXHAUSTED).
    return [
        # gRPC binds with SO_REUSEPORT by default: a second server on a port in use would start
        # and share the connections with the first one (possibly over another database).
        ("grpc.so_reuseport", 0),
        ("grpc.max_receive_message_length", max_request_bytes(payload_limit)),
        ("grpc.max_send_message_length", -1),
        ("grpc.keepalive_permit_without_calls", 1),
        # Ping idle clients too: a Watch stream of a client that died ends within ~30 s.
        ("grpc.keepalive_time_ms", 20_000),
        ("grpc.keepalive_timeout_ms", 10_000),
        ("grpc.http2.min_ping_interval_without_data_ms", CHANNEL_KEEPALIVE_MS // 2),
        ("grpc.http2.max_pings_without_data", 0),
    ]


def _host(listen: str) -> str:
    return listen.rsplit(":", 1)[0]


async def serve(
    config: ServerConfig,
    stop: asyncio.Event,
    *,
    ready: Callable[[str], None] | None = None,
    gate: Gate | None = None,
) -> None:
    """Serve until ``stop`` is set; ``ready("HOST:PORT")`` once calls are taken. ``gate``:
    who may call (by default ``config.gate()``; pass one to replace its credentials later)."""
    gate = gate or config.gate()
    store = open_store(config.url)
    await store.open()
    backend = "sqlite" if config.url.lower().startswith("sqlite") else "postgresql"
    hub = Hub(listening=backend == "sqlite")
    clock: ServerClock | None = None
    try:
        clock = await ServerClock.over(
            store, max_lease=config.max_lease, trust_client=config.trust_client_clock
        )
        await store.listen(hub.publish)
        # The caller is checked first (always: without tokens it is "anonymous", and the
        # service reads who it is); a corrupt request of a caller with a token is refused
        # INVALID_ARGUMENT before it reaches the service.
        interceptors: list[grpc.aio.ServerInterceptor] = [TokenAuth(gate), WireGuard()]
        server = grpc.aio.server(interceptors=interceptors, options=_options(config.payload_limit))
        # The Store verbs' handlers are set on the class by rule (service.py), unseen by mypy.
        service = EngineService(  # type: ignore[abstract]
            store,
            hub,
            backend=backend,
            payload_limit=config.payload_limit,
            clock=clock,
            token=config.token is not None,
        )
        pb_grpc.add_EngineServicer_to_server(service, server)
        health_service = health.aio.HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(health_service, server)
        port = _bind(server, config)
        if port == 0:
            raise OSError(f"cannot listen on {config.listen} (in use, or not an address here)")
        await server.start()
        for name in ("", SERVICE_NAME):
            await health_service.set(name, health_pb2.HealthCheckResponse.SERVING)
        if ready is not None:
            ready(f"{_host(config.listen)}:{port}")
        await stop.wait()
        for name in ("", SERVICE_NAME):
            await health_service.set(name, health_pb2.HealthCheckResponse.NOT_SERVING)
        hub.close()
        await server.stop(config.grace)
    finally:
        if clock is not None:
            clock.close()
        await store.close()
