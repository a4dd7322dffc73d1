"""What the two serving commands (``sagaway server``, ``sagaway ui``) say alike about their
tokens: that the single token is accepted beside a tokens file, and how a SIGHUP's reload of
the tokens file went (one line on stderr; a file with an error changes nothing)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import click


def note_single_token(program: str, env: str, tokens_file: Path | None, token: str | None) -> None:
    """Say on stderr that the single token is accepted too when there is a tokens file."""
    if tokens_file is not None and token is not None:
        click.echo(
            f"{program}: the single token (--token-file or ${env}) is accepted too, as "
            "principal 'default' with every role",
            err=True,
        )


def reload_tokens(program: str, tokens_file: Path | None, reload: Callable[[], str]) -> None:
    """SIGHUP: ``reload`` the tokens file (it returns a summary of what is in force, or raises
    ``ValueError`` and the previous entries stay); one line on stderr either way."""
    if tokens_file is None:
        click.echo(f"{program}: SIGHUP: no --tokens-file to reload", err=True)
        return
    try:
        summary = reload()
    except ValueError as exc:
        click.echo(
            f"{program}: tokens file NOT reloaded, the previous one stays in force: {exc}",
            err=True,
        )
        return
    click.echo(f"{program}: tokens file reloaded: {summary}", err=True)
