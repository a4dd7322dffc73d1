"""``sagaway token``: make a named token with roles, and check a tokens file.

``new`` prints the ``[[token]]`` entry (the token's digest, no secret) on stdout, so it can be
appended to a tokens file (``>> tokens.toml``), and the token itself on stderr, or into a new
file of mode 600 with ``--out``: the tokens file never holds it.
"""

from __future__ import annotations

import os
from pathlib import Path

import click

from sagaway import credentials
from sagaway.cli._support import Exit, fail, file_option
from sagaway.principals import Role


@click.group("token")
def token_command() -> None:
    """Tokens with roles for `sagaway server --tokens-file` and `sagaway ui --tokens-file`."""


@token_command.command("new")
@click.option("--name", required=True, help="Who holds it: what the audit trail records.")
@click.option(
    "--role",
    "roles",
    required=True,
    multiple=True,
    type=click.Choice([r.value for r in Role]),
    help="A role it holds (repeat for several): read, operate, worker, admin.",
)
@file_option(
    "--out",
    "Write the token to this new file (mode 600) instead of stderr.",
)
def new(name: str, roles: tuple[str, ...], out: Path | None) -> None:
    """Make a random token; print its tokens-file entry on stdout and the token on stderr.

    \b
    sagaway token new --name dashboard --role read >> tokens.toml
    """
    token = credentials.new_token()
    entry = credentials.toml_entry(name, [Role(r) for r in roles], credentials.digest(token))
    try:
        credentials.parse(entry, where="--name/--role")  # the same checks as the server's
    except ValueError as exc:
        fail(str(exc), Exit.USAGE)
    if out is not None:
        try:
            fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except OSError as exc:
            fail(f"cannot create {str(out)!r}: {exc.strerror}", Exit.USAGE)
        with os.fdopen(fd, "w", encoding="utf-8") as file:
            file.write(token + "\n")
    else:
        click.echo(f"token for {name!r} (shown once; give it to its holder): {token}", err=True)
    click.echo(entry, nl=False)


@token_command.command("check")
@click.argument("tokens_file", type=click.Path(dir_okay=False, path_type=Path))
def check(tokens_file: Path) -> None:
    """Check a tokens file as the server would (exit 2 with the first error), e.g. before
    SIGHUP. Prints who it names and their roles."""
    try:
        found = credentials.load(tokens_file)
    except ValueError as exc:
        fail(str(exc), Exit.USAGE)
    for principal in found.principals():
        held = ", ".join(r.value for r in Role if r in principal.roles)
        click.echo(f"{principal.name}: {held}")
    click.echo(f"ok: {found.summary()}", err=True)
