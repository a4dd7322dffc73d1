"""What every ``sagaway`` command shares: exit codes, the one place exceptions become them,
password masking, the ``--db`` option, and loading an application's Manager."""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import re
import sqlite3
import stat
import sys
import urllib.parse
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import click

import sagaway as sw
from sagaway._engine import audit
from sagaway.cli import _format
from sagaway.cli._exits import EXIT_CODES_HELP as EXIT_CODES_HELP  # re-exported
from sagaway.cli._exits import Exit as Exit  # re-exported
from sagaway.cli._format import safe
from sagaway.store import DatabaseNotFound, resolve_url

if TYPE_CHECKING:
    from rich.progress import Progress

    from sagaway.codecs import Chain

T = TypeVar("T")


def exit_code(exc: BaseException) -> Exit:
    """The exit code an exception means (the one mapping of every command)."""
    if isinstance(exc, (sw.WorkflowNotFound, sw.ScheduleNotFound, DatabaseNotFound)):
        return Exit.NOT_FOUND
    if isinstance(exc, (sw.EngineUnavailable, sqlite3.Error, OSError)):
        return Exit.UNREACHABLE
    if isinstance(
        exc, (ValueError, ImportError, NotImplementedError, sw.NotRegistered, sw.PayloadError)
    ):
        return Exit.USAGE
    return Exit.REFUSED


_HANDLED = (sw.SagawayError, ValueError, ImportError, NotImplementedError, sqlite3.Error, OSError)


_USER_PASSWORD = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*://[^:/@?#]*):[^/?#]*@")
"""The user info's password: up to the last '@' of the authority (a password may hold an
unencoded '@', which the PostgreSQL store then refuses)."""
_PASSWORD_PARAM = re.compile(r"([?&]password=)[^&#]*")


def mask_url(url: str) -> str:
    """``url`` with its password (user info or ``password=`` parameter) shown as ``***``:
    ``postgresql://user:***@host/db``."""
    return _PASSWORD_PARAM.sub(r"\1***", _USER_PASSWORD.sub(r"\1:***@", url))


def _secrets(url: str) -> list[str]:
    parts = urllib.parse.urlsplit(url)
    found = [parts.password] if parts.password else []
    for name, value in urllib.parse.parse_qsl(parts.query):
        if name == "password" and value:
            found.append(value)
    return [s for s in found if s]


def scrub(text: str, url: str | None) -> str:
    """``text`` on one line, with the passwords of ``url`` masked."""
    try:
        secrets = _secrets(resolve_url(url))
    except ValueError:
        secrets = []
    for secret in secrets:
        text = text.replace(secret, "***").replace(urllib.parse.quote(secret, safe=""), "***")
    return _format.safe(" ".join(text.split()))


def fail(message: str, code: Exit, url: str | None = None) -> NoReturn:
    """Print ``error: message`` (one line, passwords masked) on stderr and exit ``code``."""
    click.echo(f"error: {scrub(message, url)}", err=True)
    sys.exit(int(code))


def describe(exc: BaseException) -> str:
    """A one-line account of ``exc``; names the extra a missing optional module needs."""
    text = str(exc) or type(exc).__name__
    if isinstance(exc, ImportError) and "sagaway[" not in text:
        text += " (an optional extra may be missing: e.g. pip install 'sagaway[postgres]')"
    if isinstance(exc, (sqlite3.Error, OSError)):
        text = f"cannot open the database: {text}"
    return text


def run(coro: Awaitable[T], url: str | None) -> T:
    """Run ``coro``; an engine or database error ends the process with its exit code."""
    try:
        return asyncio.run(coro)  # type: ignore[arg-type]
    except _HANDLED as exc:
        fail(describe(exc), exit_code(exc), url)


def with_manager(
    url: str | None,
    action: Callable[[sw.Manager], Awaitable[T]],
    *,
    codec: Chain | None = None,
    audit: str = "operator",
) -> T:
    """Open a Manager on ``url`` that creates nothing, run ``action`` with it, close it: the
    one-off request of an operator's command (errors end the process as ``run`` says)."""

    async def go() -> T:
        async with sw.Manager(url, codec=codec, audit=audit).connect(create=False) as manager:
            return await action(manager)

    return run(go(), url)


def can_ask() -> bool:
    """Whether someone at a terminal can answer a confirmation question."""
    return sys.stdin.isatty()


def confirm(
    question: str, *, asking: bool, verb: str, aborted: str | None = None, err: bool = False
) -> None:
    """Ask ``question`` (on stderr with ``err``) where ``asking`` says a terminal can answer;
    without one, exit 2 saying to pass --yes to ``verb``. Answered no: print ``aborted`` (if
    any) and exit 1."""
    if not asking:
        fail(f"stdin is not a terminal, so no one can confirm: pass --yes to {verb}", Exit.USAGE)
    if not click.confirm(question, default=False, err=err):
        if aborted is not None:
            click.echo(aborted, err=True)
        sys.exit(int(Exit.REFUSED))


def progress_bar(label: str) -> Progress:
    """The bar of a long command (``purge``, ``batch``), on stderr: done of all, time taken."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    columns = (TextColumn(label), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    return Progress(*columns, console=Console(stderr=True), transient=True)


def json_arg(text: str, what: str, example: str) -> Any:
    """``text`` read as JSON (exit 2, naming ``what`` with an example, if it is not)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise click.BadParameter(f"{what} must be JSON ({exc}); e.g. {example}") from exc


def url_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    """The ``--db URL`` option (else ``$SAGAWAY_DATABASE_URL``, else ``sqlite:///sagaway.db``)."""
    return click.option(
        "--db",
        "url",
        envvar="SAGAWAY_DATABASE_URL",
        default=None,
        metavar="URL",
        help="Database URL (default: $SAGAWAY_DATABASE_URL or sqlite:///sagaway.db; "
        "postgresql://… needs the sagaway[postgres] extra; grpc://HOST:PORT reaches an Engine "
        "Server, with its token in $SAGAWAY_TOKEN).",
    )(fn)


_KEY_FILE_HELP = (
    "File of payload keys (one base64 key per line, the current one first; else "
    "$SAGAWAY_CODEC_KEYS, keys separated by commas)"
)


def reason_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``--reason TEXT``: why, kept in the audit trail (``sagaway audit``, ``sagaway show``)."""
    return click.option(
        "--reason",
        default=None,
        metavar="TEXT",
        callback=_checked_reason,
        help="Why (at most 1000 characters): kept with who and when in the audit trail "
        "(sagaway audit, sagaway show).",
    )(fn)


def _checked_reason(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """Refused before anything is done (exit 2), not after a count or a question."""
    try:
        audit.check_reason(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None
    return value


def listen_option(default: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """``--listen HOST:PORT`` of a command that serves (``server``, ``ui``), on ``default``."""
    return click.option(
        "--listen",
        default=default,
        show_default=True,
        metavar="HOST:PORT",
        help="Address to serve on (port 0: any free port; the ready line says which).",
    )


def file_option(name: str, help: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """An option naming one file (a ``Path``; a directory is refused)."""
    return click.option(name, type=click.Path(dir_okay=False, path_type=Path), help=help)


def codec_key_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``--codec-key-file PATH`` (else ``$SAGAWAY_CODEC_KEYS``): keys that open encrypted
    payloads for display; without them such payloads show as «encrypted»."""
    return _key_file(fn, f"{_KEY_FILE_HELP}: encrypted payloads are shown decoded.")


def sealing_key_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``--codec-key-file PATH`` for a command that seals payloads again (``sagaway fork``)."""
    return _key_file(
        fn,
        f"{_KEY_FILE_HELP}: needed to fork a workflow whose payloads are encrypted (the fork "
        "seals them again for its own run).",
    )


def _key_file(fn: Callable[..., Any], help: str) -> Callable[..., Any]:
    return click.option(
        "--codec-key-file",
        "codec_key_file",
        default=None,
        metavar="PATH",
        type=click.Path(exists=True, dir_okay=False),
        help=help,
    )(fn)


def warn_if_exposed(path: str | os.PathLike[str] | None, what: str) -> None:
    """Warn on stderr when a file holding a secret (token, key) is open to its group or to
    others: whoever can read it holds the secret. A warning, not a refusal: secrets mounted by
    an orchestrator are often 0644 in a container of one user."""
    if path is None or os.name == "nt":
        return
    try:
        mode = stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        return  # reading it says why
    if mode & 0o077:
        click.echo(
            f"warning: the {what} {safe(str(path))!r} is open to its group or others (mode "
            f"{mode:04o}): anyone who can read it holds the secret; chmod 600 it",
            err=True,
        )


KEYS_ENV = "SAGAWAY_CODEC_KEYS"
"""``codecs.KEYS_ENV``: without it or a key file, a command loads no codec (a quicker start)."""


def reading_codec(key_file: str | None) -> Chain | None:
    """The codec chain that opens payloads for display (None: show them «encrypted»)."""
    return _codec(key_file, writer=False)


def sealing_codec(key_file: str | None) -> Chain | None:
    """The codec chain of a command whose writes workers run (a worker's: ``codecs.writer``)."""
    return _codec(key_file, writer=True)


def codec_keys(key_file: str | None) -> list[str] | None:
    """The payload keys in ``key_file``, else ``$SAGAWAY_CODEC_KEYS`` (None: neither); exit 2
    when they cannot be read."""
    warn_if_exposed(key_file, "codec key file")
    from sagaway import codecs

    try:
        return codecs.keys_from(key_file)
    except (ValueError, OSError) as exc:
        fail(f"codec keys: {exc}", Exit.USAGE)
    except ImportError as exc:
        fail(str(exc), Exit.USAGE)


def _codec(key_file: str | None, *, writer: bool) -> Chain | None:
    if key_file is None and not os.environ.get(KEYS_ENV):
        return None  # no keys, no chain (as codecs.reader/writer answer), codecs not imported
    keys = codec_keys(key_file)
    from sagaway import codecs

    try:
        return (codecs.writer if writer else codecs.reader)(keys)
    except (ValueError, OSError) as exc:
        fail(f"codec keys: {exc}", Exit.USAGE)
    except ImportError as exc:
        fail(str(exc), Exit.USAGE)


async def check_reachable(url: str | None) -> None:
    """Fail within seconds when the database cannot be reached (a Manager that creates its
    database would wait ``pool_timeout`` for a server that is down)."""
    try:
        async with sw.Manager(url).connect(create=False):
            pass
    except DatabaseNotFound:
        pass  # reachable; the command creates it


def load_manager(target: str) -> sw.Manager:
    """The Manager at ``MODULE:ATTRIBUTE``."""
    module_name, _, attr = target.partition(":")
    if not module_name or not attr:
        raise click.BadParameter("expected MODULE:ATTRIBUTE, e.g. myapp.workflows:manager")
    sys.path.insert(0, ".")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise click.BadParameter(f"cannot import {module_name!r}: {exc}") from exc
    if not hasattr(module, attr):
        raise click.BadParameter(f"module {module_name} has no attribute {attr}")
    manager = getattr(module, attr)
    if not isinstance(manager, sw.Manager):
        raise click.BadParameter(f"{target} is {type(manager).__name__}, not a sagaway.Manager")
    return manager


def read_token(token_file: Path | None, env: str) -> str | None:
    """The token in ``token_file`` (exit 2 if unreadable or empty), else ``$env``, else None."""
    if token_file is not None:
        warn_if_exposed(token_file, "token file")
        try:
            token = token_file.read_text(encoding="utf-8").strip()
        except OSError as exc:
            fail(f"cannot read the token file {str(token_file)!r}: {exc.strerror}", Exit.USAGE)
        if not token:
            fail(f"the token file {str(token_file)!r} is empty", Exit.USAGE)
        return token
    return os.environ.get(env, "").strip() or None
