"""``sagaway purge``: delete ended workflows older than a duration (retention).

It counts first (a dry run stops there), asks before deleting, then purges in batches with a
progress bar. Asking follows ``apt-get`` and ``terraform destroy``: a terminal gets a yes/no
question; without one (a cron job, a pipe) nothing is deleted unless ``--yes`` says so, since
no one could have answered.
"""

from __future__ import annotations

import datetime
import re

import click

from sagaway.cli._options import number_option, yes_option
from sagaway.cli._support import (
    EXIT_CODES_HELP,
    can_ask,
    confirm,
    mask_url,
    progress_bar,
    reason_option,
    url_option,
    with_manager,
)
from sagaway.states import ended_statuses
from sagaway.store import resolve_url

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_PART = re.compile(r"(\d+(?:\.\d+)?)([smhdw])")
_DURATION = re.compile(r"(?:\d+(?:\.\d+)?[smhdw])+")


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
@number_option("--batch-size", default=500, minimum=1, help="Workflows deleted per transaction.")
@yes_option
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
    found = with_manager(url, lambda m: m.purge(older_than, statuses=statuses, dry_run=True))
    if dry_run:
        click.echo(f"would purge {found} workflows")
        return
    if found and not yes:
        question = (
            f"Purge {found} workflows that ended more than {_ago(older_than)} ago from {where}?"
        )
        confirm(question, asking=can_ask(), verb="purge", aborted="aborted: nothing purged")
    with progress_bar("purging") as progress:
        task = progress.add_task("purge", total=found or None)
        purged = with_manager(
            url,
            lambda m: m.purge(
                older_than,
                statuses=statuses,
                batch_size=batch_size,
                on_batch=lambda n: progress.advance(task, n),
                reason=reason,
            ),
        )
    click.echo(f"purged {purged} workflows")
