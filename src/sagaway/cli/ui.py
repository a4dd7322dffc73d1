"""``sagaway ui``: the web console (an ASGI app run by uvicorn)."""

from __future__ import annotations

import asyncio
import signal
import socket
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from sagaway.cli._options import seconds_option
from sagaway.cli._serving import note_single_token, reload_tokens
from sagaway.cli._support import (
    Exit,
    codec_key_option,
    codec_keys,
    fail,
    file_option,
    listen_option,
    mask_url,
    read_token,
    url_option,
)
from sagaway.store import open_store, resolve_url

if TYPE_CHECKING:
    from starlette.applications import Starlette

    from sagaway.console import ConsoleConfig

TOKEN_ENV = "SAGAWAY_UI_TOKEN"
PROGRAM = "sagaway ui"


@click.command()
@url_option
@listen_option("127.0.0.1:8080")
@file_option(
    "--token-file",
    f"File holding the token every request must carry (else ${TOKEN_ENV}); "
    "needed to listen beyond this machine.",
)
@file_option(
    "--tokens-file",
    "TOML file of named tokens with roles (read: pages; operate: retry, cancel, signal; "
    "admin: terminate), as `sagaway server --tokens-file` takes. SIGHUP reloads it.",
)
@click.option("--read-only", is_flag=True, help="No actions: show workflows only.")
@seconds_option(
    "--refresh",
    "poll_interval",
    default=2.0,
    minimum=0.1,
    help="How often open pages refresh their live part.",
)
@seconds_option(
    "--session-idle",
    default=12 * 3600.0,
    minimum=60,
    help="A browser's login ends after this long without a request (and 7 days after it, "
    "at logout, or when the console restarts).",
)
@click.option("-v", "--verbose", is_flag=True, help="Log every request.")
@codec_key_option
def ui(
    url: str | None,
    listen: str,
    token_file: Path | None,
    verbose: bool,
    codec_key_file: str | None,
    **settings: Any,
) -> None:
    """Serve the web console: workflows with live counts, each workflow's steps on a time
    axis, and the operator actions (retry, cancel, terminate, signal).

    Prints `listening on http://HOST:PORT` when ready; SIGTERM or Ctrl-C stops it. Listening
    on anything but the loopback address needs a token (--token-file or $SAGAWAY_UI_TOKEN):
    browsers then log in once with it, scripts send `Authorization: Bearer TOKEN`.
    """
    try:
        import uvicorn  # noqa: F401  (here: without the extra, exit 2 before anything else)

        from sagaway.console import ConsoleConfig
        from sagaway.console.config import parse_listen
    except ImportError as exc:
        fail(f"{exc}: pip install 'sagaway[ui]'", Exit.USAGE)
    url = resolve_url(url)
    try:
        host, port = parse_listen(listen)
        open_store(url, create=False)  # a malformed URL fails here, not on the first page
    except (ValueError, ImportError) as exc:
        fail(str(exc), Exit.USAGE, url)
    token = read_token(token_file, TOKEN_ENV)
    keys = tuple(codec_keys(codec_key_file) or ())
    # The other options are the config's own: tokens_file, read_only, poll_interval (--refresh)
    # and session_idle.
    console = ConsoleConfig(url=url, token=token, codec_keys=keys, **settings)
    try:
        found = console.load_credentials()  # a tokens file with an error: exit 2 now
    except ValueError as exc:
        fail(str(exc), Exit.USAGE)
    _check_tokens(found is not None, host, listen, console.tokens_file, token)
    try:
        sock = _bind(host, port)
    except OSError as exc:
        fail(f"cannot listen on {listen}: {exc.strerror or exc}", Exit.USAGE)
    _serve(console, sock, url, verbose)


def _check_tokens(
    has_token: bool, host: str, listen: str, tokens_file: Path | None, token: str | None
) -> None:
    """Refuse to serve beyond the loopback address without a token; say when the single
    token is accepted beside a tokens file."""
    from sagaway.console.config import is_loopback

    if not has_token and not is_loopback(host):
        fail(
            f"refusing to serve on {listen} without a token: anyone who reaches it could act on "
            f"workflows. Give --tokens-file or --token-file (or ${TOKEN_ENV}), or listen on "
            "127.0.0.1",
            Exit.USAGE,
        )
    note_single_token(PROGRAM, TOKEN_ENV, tokens_file, token)


def _serve(console: ConsoleConfig, sock: socket.socket, url: str, verbose: bool) -> None:
    """Serve the console on ``sock`` until SIGTERM/SIGINT; SIGHUP reloads the tokens file."""
    import uvicorn

    from sagaway.console import create_app

    app = create_app(console)
    config = uvicorn.Config(
        app,
        log_level="info" if verbose else "warning",
        access_log=verbose,
        lifespan="on",
    )
    listening = f"listening on http://{_shown(sock)}"
    serving = f"{PROGRAM}: {mask_url(url)}"

    class Server(uvicorn.Server):
        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            await super().startup(sockets)
            if not self.should_exit:  # it did start: say so, as `sagaway server` does
                asyncio.get_running_loop().add_signal_handler(signal.SIGHUP, reload, app)
                click.echo(listening)
                click.echo(serving, err=True)

    async def go() -> None:
        await Server(config).serve(sockets=[sock])

    asyncio.run(go())


def reload(app: Starlette) -> None:
    """SIGHUP: read the tokens file again (one line on stderr; an error changes nothing)."""
    from sagaway.console.app import reload_credentials

    reload_tokens(PROGRAM, app.state.config.tokens_file, lambda: reload_credentials(app))


def _shown(sock: socket.socket) -> str:
    """``HOST:PORT`` of a bound socket (``[::1]:PORT`` for IPv6)."""
    host, port = sock.getsockname()[:2]
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _bind(host: str, port: int) -> socket.socket:
    """A listening socket on ``host``:``port`` (port 0: a free one, read back for the ready
    line)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    if host.lower() == "localhost":
        host = "127.0.0.1"
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(128)
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock
