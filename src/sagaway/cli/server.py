"""``sagaway server``: run the Engine Server in front of a database."""

from __future__ import annotations

import asyncio
import logging
import signal
from pathlib import Path
from typing import TYPE_CHECKING

import click

from sagaway.cli._options import seconds_option
from sagaway.cli._serving import note_single_token, reload_tokens
from sagaway.cli._support import (
    Exit,
    check_reachable,
    fail,
    file_option,
    listen_option,
    mask_url,
    read_token,
    run,
    url_option,
    warn_if_exposed,
)
from sagaway.store import resolve_url

if TYPE_CHECKING:
    from sagaway.server.app import ServerConfig
    from sagaway.server.auth import Gate

TOKEN_ENV = "SAGAWAY_SERVER_TOKEN"
PROGRAM = "sagaway server"


@click.command()
@url_option
@listen_option("127.0.0.1:7233")
@file_option(
    "--token-file",
    f"File holding the bearer token every call must carry (else ${TOKEN_ENV}).",
)
@file_option(
    "--tokens-file",
    "TOML file of named tokens (and client certificates) with their roles: read, "
    "operate, worker, admin (docs/security.md). SIGHUP reloads it. With --token-file too, "
    "that token is also accepted, as 'default' with every role.",
)
@file_option("--tls-cert", "PEM certificate.")
@file_option("--tls-key", "PEM private key.")
@file_option(
    "--tls-client-ca",
    "PEM CA: clients must present a certificate it signed (mutual TLS).",
)
@click.option(
    "--payload-limit",
    type=click.IntRange(min=1024),
    default=None,
    help="Largest payload (bytes of JSON) a call may carry [default: 2 MiB].",
)
@seconds_option(
    "--max-lease",
    default=300.0,
    minimum=0.001,
    help="Longest lease a client may take or renew; longer requests are shortened. At least "
    "the applications' lease_timeout (default 30 s).",
)
@click.option(
    "--trust-client-clock",
    is_flag=True,
    hidden=True,
    help="Act at the time clients send, not the server's: for test suites that drive time with "
    "a fake clock. Never in production: any client could then expire live leases.",
)
@click.option("-v", "--verbose", is_flag=True, help="Log at INFO level.")
def server(
    url: str | None,
    listen: str,
    token_file: Path | None,
    tokens_file: Path | None,
    tls_cert: Path | None,
    tls_key: Path | None,
    tls_client_ca: Path | None,
    payload_limit: int | None,
    max_lease: float,
    trust_client_clock: bool,
    verbose: bool,
) -> None:
    """Serve the engine over gRPC: applications use --db grpc://HOST:PORT (or
    Manager("grpc://HOST:PORT")) and need no database access of their own.

    Prints `listening on HOST:PORT` when ready. SIGTERM or Ctrl-C stops it gracefully: calls in
    flight finish, then it exits 0. SIGHUP reloads --tokens-file (a file with an error is
    reported and the previous one stays in force). Without a token anyone who reaches the port
    can run workflows: give --tokens-file or --token-file (or $SAGAWAY_SERVER_TOKEN) beyond a
    trusted host.
    """
    try:
        from sagaway.server.app import ServerConfig
    except ImportError as exc:
        fail(f"{exc}: pip install 'sagaway[server]'", Exit.USAGE)
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    url = resolve_url(url)
    if url.lower().startswith("grpc"):
        fail("the server holds a database: --db sqlite:///… or postgresql://…", Exit.USAGE)
    warn_if_exposed(tls_key, "TLS key")
    try:
        config = ServerConfig(
            url=url,
            listen=listen,
            token=read_token(token_file, TOKEN_ENV),
            tokens_file=tokens_file,
            tls_cert=tls_cert,
            tls_key=tls_key,
            tls_client_ca=tls_client_ca,
            **({"payload_limit": payload_limit} if payload_limit else {}),
            max_lease=max_lease,
            trust_client_clock=trust_client_clock,
        )
        gate = config.gate()  # a tokens file with an error: exit 2 now, not at the first call
    except ValueError as exc:
        fail(str(exc), Exit.USAGE)
    note_single_token(PROGRAM, TOKEN_ENV, tokens_file, config.token)

    _serve(config, gate, url)


def _serve(config: ServerConfig, gate: Gate, url: str) -> None:
    """Serve until SIGTERM/SIGINT; SIGHUP reloads the tokens file."""
    from sagaway.server.app import serve

    # A database that is down fails here within seconds (with its own message), not after the
    # store's pool timeout; a missing one is fine: the server creates it.
    run(check_reachable(url), url)

    async def go() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        loop.add_signal_handler(signal.SIGHUP, reload, config, gate)

        def ready(address: str) -> None:
            click.echo(f"listening on {address}", nl=True)
            click.echo(f"{PROGRAM}: {mask_url(url)}", err=True)

        await serve(config, stop, ready=ready, gate=gate)

    run(go(), url)


def reload(config: ServerConfig, gate: Gate) -> None:
    """SIGHUP: read the tokens file again and let its entries in from the next call on."""

    def load() -> str:
        found = config.load_credentials()
        gate.replace(found)
        return found.summary() if found is not None else "no token"

    reload_tokens(PROGRAM, config.tokens_file, load)
