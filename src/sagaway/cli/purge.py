"""``sagaway purge``: delete ended workflows older than a duration (retention).

It counts first (a dry run stops there), asks before deleting, then purges in batches with a
progress bar. Asking follows ``apt-get`` and ``terraform destroy``: a terminal gets a yes/no
question; without one (a cron job, a pipe) nothing is deleted unless ``--yes`` says so, since
no one could have answered.
"""

from __future__ import annotations

import datetime
import re
import sys

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

import sagaway as sw
from sagaway.cli._support import (
    EXIT_CODES_HELP,
    Exit,
    fail,
    mask_url,
    reason_option,
    run,
    url_option,
)
from sagaway.states import ended_statuses
from sagaway.store import resolve_url

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_PART = re.compile(r"(\d+(?:\.\d+)?)([smhdw])")
_DURATION = re.compile(r"(?:\d+(?:\.\d+)?[smhdw])+")

err_console = Console(stderr=True)


def parse_duration(text: str) -> float:
    """Seconds in ``90s``, ``15m``, ``12h``, ``30d``, ``2w`` or a sum such as ``1d12h``;
    ``ValueError`` for anything else, or for zero."""
    compact = text.strip().lower()
    if not _DURATION.fullmatch(compact):
        raise ValueError(
            f"invalid duration {text!r}: use a number and a unit s, m, h, d or w "
            "(e.g. 90s, 15m, 12h, 30d, 2w, 1d12h)"
        )
    seconds = sum(float(n) * _UNITS[unit] for n, unit in _PART.findall(compact))
    if seconds <= 0:
        raise ValueError(f"invalid duration {text!r}: must be longer than zero")
    return seconds


def _duration(ctx: click.Context, param: click.Parameter, value: str) -> float:
    try:
        return parse_duration(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from exc


def _statuses(ctx: click.Context, param: click.Parameter, value: str | None) -> list[str] | None:
    if value is None:
        return None
    try:
        return [s.value for s in ended_statuses(value.split(","))]
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from exc


def can_ask() -> bool:
    """Whether someone at a terminal can answer the confirmation question."""
    return sys.stdin.isatty()


def _ago(seconds: float) -> str:
    return str(datetime.timedelta(seconds=round(seconds)))


@click.command(epilog=EXIT_CODES_HELP)
@url_option
@click.option(
    "--older-than",
    "older_than",
    required=True,
    callback=_duration,
    metavar="DURATION",
    help="Purge workflows that ended longer ago than this: 90s, 15m, 12h, 30d, 2w, 1d12h.",
)
@click.option(
    "--status",
    "statuses",
    callback=_statuses,
    metavar="STATUS[,STATUS]",
    help="Only these ended statuses (default: COMPLETED, FAILED, CANCELLED, TERMINATED).",
)
@click.option("--dry-run", is_flag=True, help="Only count what would be purged.")
@click.option(
    "--batch-size",
    type=click.IntRange(min=1),
    default=500,
    show_default=True,
    help="Workflows deleted per transaction.",
)
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@reason_option
def purge(
    url: str | None,
    older_than: float,
    statuses: list[str] | None,
    dry_run: bool,
    batch_size: int,
    yes: bool,
    reason: str | None,
) -> None:
    """Delete ended workflows (with their steps and signals) older than --older-than.

    Live workflows (PENDING, RUNNING, WAITING, SUSPENDED) are never touched, nor an ended one
    a live workflow may still read (its child, or one it attached to). Workers may keep
    running: the purge goes in short batches. A purged key can be used again. Asks for
    confirmation on a terminal; without one, it purges only with --yes (exit 2 otherwise).
    Answering no exits 1. The purge is recorded in the audit trail (who, when, how many,
    --reason); the entries of the purged workflows stay.
    """
    where = mask_url(resolve_url(url))

    async def count() -> int:
        async with sw.Manager(url).connect(create=False) as manager:
            return await manager.purge(older_than, statuses=statuses, dry_run=True)

    found = run(count(), url)
    if dry_run:
        click.echo(f"would purge {found} workflows")
        return
    if found and not yes:
        if not can_ask():
            fail("stdin is not a terminal, so no one can confirm: pass --yes to purge", Exit.USAGE)
        question = (
            f"Purge {found} workflows that ended more than {_ago(older_than)} ago from {where}?"
        )
        if not click.confirm(question, default=False):
            click.echo("aborted: nothing purged", err=True)
            sys.exit(int(Exit.REFUSED))

    async def go() -> int:
        columns = (
            TextColumn("purging"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
        )
        with Progress(*columns, console=err_console, transient=True) as progress:
            task = progress.add_task("purge", total=found or None)
            async with sw.Manager(url).connect(create=False) as manager:
                return await manager.purge(
                    older_than,
                    statuses=statuses,
                    batch_size=batch_size,
                    on_batch=lambda n: progress.advance(task, n),
                    reason=reason,
                )

    click.echo(f"purged {run(go(), url)} workflows")
