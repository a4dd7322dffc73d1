"""``sagaway batch cancel|terminate|retry|signal``: one operator verb on every workflow a
filter selects.

Each command first runs the batch as a dry run (a listing that changes nothing) to count what
it would do; ``--dry-run`` stops there. Then it asks, as ``sagaway purge`` does: a terminal
gets a yes/no question, and without one (a pipe, a cron job) nothing is done unless ``--yes``
says so. The batch itself is a paced loop of ordinary single-key calls (``--rate`` a second)
under a progress bar, and ends with a summary of what was done and what was refused.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import sys
from collections.abc import Callable
from typing import Any

import click
from rich.console import Console

import sagaway as sw
from sagaway import search
from sagaway._engine import versions
from sagaway.cli import _format
from sagaway.cli._format import escape
from sagaway.cli._options import (
    json_option,
    key_prefix_option,
    name_option,
    number_option,
    stacked,
    yes_option,
)
from sagaway.cli._support import (
    EXIT_CODES_HELP,
    Exit,
    can_ask,
    codec_key_option,
    confirm,
    json_arg,
    mask_url,
    progress_bar,
    reading_codec,
    url_option,
    with_manager,
)
from sagaway.cli.listing import parse_statuses
from sagaway.codecs import Chain
from sagaway.store import resolve_url

console = Console()

SHOWN = 20
"""Refused workflows listed by key in the text summary (``--json`` lists every one)."""


@dataclasses.dataclass(frozen=True)
class Options:
    """What every ``sagaway batch`` command takes."""

    url: str | None
    filter: sw.WorkflowFilter
    reason: str | None
    rate: float | None
    page_size: int
    dry_run: bool
    yes: bool
    as_json: bool


def _filter(
    name: str | None,
    status: str | None,
    key_prefix: str | None,
    code_versions: str | None,
    since: str | None,
    until: str | None,
    where: tuple[str, ...],
    utc: bool,
    everything: bool,
) -> sw.WorkflowFilter:
    given = (name, status, key_prefix, code_versions, since, until)
    if given == (None,) * 6 and not where and not everything:
        raise click.UsageError(
            "give a filter (--name, --status, --key-prefix, --since, --until, --version, "
            "--where), or --all to select every workflow in the action's default statuses"
        )
    try:
        search.filters(where)  # checked here, for a message that names the option
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--where") from None
    try:
        chosen = frozenset() if code_versions is None else versions.parse_versions(code_versions)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--version") from None
    bounds = _format.time_bounds(since, until, utc=utc)
    try:
        return sw.WorkflowFilter(
            name=name,
            statuses=frozenset(parse_statuses(status)),
            key_prefix=key_prefix or "",
            code_versions=chosen,
            where=where,
            **bounds,
        )
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None


def _options(default_reason: str | None) -> list[Callable[[Any], Any]]:
    """The options of every ``sagaway batch`` command, in the order ``--help`` shows them."""
    return [
        url_option,
        name_option,
        click.option(
            "--status",
            metavar="S[,S...]",
            help="Only these statuses (default: SUSPENDED for retry, else the live ones: "
            "PENDING, RUNNING, WAITING, SUSPENDED).",
        ),
        key_prefix_option,
        click.option(
            "--version", "code_versions", metavar="V[,V...]", help="Only these code versions."
        ),
        click.option("--since", metavar="WHEN", help="Created at or after WHEN (as list)."),
        click.option("--until", metavar="WHEN", help="Created before WHEN (as list)."),
        click.option(
            "--where",
            "--attr",
            "where",
            multiple=True,
            metavar="NAME=VALUE",
            help="Only workflows whose search attribute matches, as `sagaway list --where` "
            "(repeatable, all must match): customer=4711, amount>=100, vip=true.",
        ),
        click.option("--utc", is_flag=True, help="Naive --since/--until times are UTC."),
        click.option("--all", "everything", is_flag=True, help="Select without a filter."),
        click.option("--reason", default=default_reason, show_default=True, help="Why (audited)."),
        number_option(
            "--rate",
            default=100.0,
            minimum=0,
            help="At most this many calls a second (0: unpaced).",
        ),
        click.option(
            "--page-size",
            type=click.IntRange(1, 1000),
            default=100,
            show_default=True,
            help="Workflows listed per query.",
        ),
        click.option("--dry-run", is_flag=True, help="Only report what would be done."),
        yes_option,
        json_option("Print the report as JSON."),
    ]


def batch_options(default_reason: str | None) -> Callable[[Callable[..., Any]], Any]:
    """The filter, pacing and confirmation options, folded into one ``opts: Options``."""

    def decorate(fn: Callable[..., Any]) -> Any:
        @functools.wraps(fn)
        def command(**kw: Any) -> None:
            picked = (
                "name",
                "status",
                "key_prefix",
                "code_versions",
                "since",
                "until",
                "where",
                "utc",
            )
            chosen = _filter(**{k: kw.pop(k) for k in (*picked, "everything")})
            opts = Options(
                url=kw.pop("url"),
                filter=chosen,
                reason=kw.pop("reason"),
                rate=kw.pop("rate") or None,
                page_size=kw.pop("page_size"),
                dry_run=kw.pop("dry_run"),
                yes=kw.pop("yes"),
                as_json=kw.pop("as_json"),
            )
            fn(opts, **kw)

        return stacked(*_options(default_reason))(command)

    return decorate


def execute(
    opts: Options, action: sw.BatchAction, codec: Chain | None = None, **extra: Any
) -> None:
    """Count (a dry run), ask, run with a progress bar, summarise; exit 1 if a call failed."""

    def go(dry_run: bool, on_item: Callable[[sw.BatchItem], None] | None) -> sw.BatchReport:
        # audit="all": a signal batch is recorded in the audit trail as `sagaway signal` is.
        return with_manager(
            opts.url,
            lambda manager: manager.batch(
                action,
                opts.filter,
                reason=opts.reason,
                rate=opts.rate,
                page_size=opts.page_size,
                dry_run=dry_run,
                on_item=on_item,
                **extra,
            ),
            codec=codec,
            audit="all",
        )

    plan = go(True, None)
    if opts.dry_run or not plan.done:  # nothing to do: the listing is the whole batch
        _summarise(dataclasses.replace(plan, dry_run=opts.dry_run), opts.as_json)
        return
    _confirm(opts, action, plan)
    with progress_bar(action.value) as progress:
        task = progress.add_task(action.value, total=plan.matched or None)
        report = go(False, lambda _item: progress.advance(task))
    _summarise(report, opts.as_json)
    if report.failed:
        sys.exit(int(Exit.REFUSED))


def _confirm(opts: Options, action: sw.BatchAction, plan: sw.BatchReport) -> None:
    if opts.yes:
        return
    sample = ", ".join(i.key for i in plan.done[:5]) + (", ..." if len(plan.done) > 5 else "")
    where = mask_url(resolve_url(opts.url))
    question = (
        f"{action.value.capitalize()} {len(plan.done)} workflows ({opts.filter.describe()}: "
        f"{sample}) in {where}?"
    )
    confirm(question, asking=can_ask(), verb="go ahead", aborted="aborted: nothing done", err=True)


def _summarise(report: sw.BatchReport, as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps(report.to_json(), indent=2))
        return
    counts = {o: n for o, n in report.counts().items() if n}
    verb = "would be done" if report.dry_run else "done"
    done = counts.pop(sw.BatchOutcome.DONE, 0)
    refused = ", ".join(f"{n} {o.value.replace('_', ' ')}" for o, n in counts.items())
    console.print(
        f"{report.action.value}: {report.matched} selected ({escape(report.filter.describe())}), "
        f"{done} {verb}" + (f", {sum(counts.values())} refused ({refused})" if counts else ""),
        highlight=False,
        soft_wrap=True,
    )
    for item in report.refused[:SHOWN]:
        detail = f": {item.detail}" if item.detail else ""
        console.print(f"  {escape(item.key)} {item.outcome.value}{escape(detail)}", highlight=False)
    if len(report.refused) > SHOWN:
        console.print(f"  ... and {len(report.refused) - SHOWN} more (--json lists them all)")


@click.group("batch", epilog=EXIT_CODES_HELP)
def batch_command() -> None:
    """Cancel, terminate, retry or signal every workflow a filter selects.

    Asks for confirmation on a terminal; without one, acts only with --yes (exit 2
    otherwise); answering no exits 1. Runs as paced single-key calls (--rate) while workers
    keep running; running the same batch again does no harm (see docs/batch.md). Exit 0 when
    the batch ran (refusals such as "already ended" are reported, not errors), 1 if a call
    failed or the confirmation was declined.
    """


@batch_command.command("cancel")
@batch_options("cancelled by sagaway batch")
def cancel(opts: Options) -> None:
    """Ask every selected live workflow to cancel: each compensates and ends CANCELLED."""
    execute(opts, sw.BatchAction.CANCEL)


@batch_command.command("terminate")
@batch_options("terminated by sagaway batch")
def terminate(opts: Options) -> None:
    """End every selected live workflow at once as TERMINATED, without compensating."""
    execute(opts, sw.BatchAction.TERMINATE)


@batch_command.command("retry")
@batch_options(None)
def retry(opts: Options) -> None:
    """Make every selected SUSPENDED workflow due now."""
    execute(opts, sw.BatchAction.RETRY)


@batch_command.command("signal")
@click.argument("signal_name", metavar="NAME")
@click.argument("payload", default="null")
@click.option(
    "--dedupe-id",
    help="Send at most once per workflow for this id (default: one derived from NAME and "
    "PAYLOAD, so the same batch run again sends nothing twice).",
)
@codec_key_option
@batch_options(None)
def signal(
    opts: Options,
    signal_name: str,
    payload: str,
    dedupe_id: str | None,
    codec_key_file: str | None,
) -> None:
    """Send signal NAME with a JSON PAYLOAD to every selected live workflow (with the codec
    keys, the payload is stored encrypted, as `sagaway signal` does)."""
    data = json_arg(payload, "PAYLOAD", "'{\"ok\": true}'")
    codec = reading_codec(codec_key_file)
    execute(
        opts,
        sw.BatchAction.SIGNAL,
        codec,
        signal=signal_name,
        payload=data,
        dedupe_id=dedupe_id,
    )
