"""``sagaway audit``: the audit trail of operator actions across workflows (purged ones
included), and the audit lines of ``sagaway show``.

Who, what, when and why come from the database (operators' reasons, principals' names): every
one is printed through ``_format``'s escapes, so a control character in a stored reason cannot
act on the terminal.
"""

from __future__ import annotations

import json
from typing import Any

import click
from rich.console import Console

import sagaway as sw
from sagaway._engine.audit import ACTIONS as _ALL
from sagaway.cli import _format
from sagaway.cli._format import escape
from sagaway.cli._options import json_option, limit_option, utc_option
from sagaway.cli._support import mask_url, url_option, with_manager
from sagaway.cli._table import PlainTable
from sagaway.store import resolve_url

console = Console()

ACTIONS = tuple(sorted(_ALL))


def entry_json(e: sw.AuditEntry, clock: _format.Clock) -> dict[str, Any]:
    """One entry in ``audit --json`` and ``show --json``'s ``audit`` list."""
    return clock.record(e, "seq at actor on_behalf_of action target run_id reason details")


def details_text(e: sw.AuditEntry) -> str:
    """``key=value`` pairs of an entry's details, one line (escaped by the caller)."""
    return " ".join(f"{k}={json.dumps(v)}" for k, v in sorted(e.details.items()))


def print_show_audit(out: Console, entries: list[sw.AuditEntry], clock: _format.Clock) -> None:
    """``show``'s lines: one per operator action on the workflow, oldest first."""
    out.print("[bold]audit[/bold] (operator actions, oldest first)")
    for e in entries:
        why = f"  reason {escape(repr(e.reason))}" if e.reason else ""
        more = f"  {escape(details_text(e))}" if e.details else ""
        out.print(
            f"  {clock.text(e.at)}  {escape(e.action)}  by {escape(e.who)}{why}{more}",
            soft_wrap=True,
            highlight=False,
        )


@click.command("audit")
@url_option
@click.option(
    "--since",
    metavar="WHEN",
    help="Only entries at or after WHEN: an ISO 8601 date or date-time, or a duration ago "
    "(90s, 15m, 2h, 3d, 1w).",
)
@click.option("--until", metavar="WHEN", help="Only entries before WHEN (as --since).")
@click.option("--actor", help="Only entries of this actor (or made on behalf of it).")
@click.option(
    "--action",
    metavar="A[,A...]",
    help=f"Only these actions, comma-separated: {', '.join(ACTIONS)}.",
)
@click.option("--key", help="Only entries about this workflow key (or schedule id).")
@click.option("--run", "run_id", help="Only entries about this run id.")
@click.option(
    "--before",
    type=click.IntRange(min=1),
    metavar="SEQ",
    help="The next page: entries older than this seq (printed under the previous page).",
)
@limit_option("At most this many, newest first.")
@utc_option
@json_option()
def audit(
    url: str | None,
    since: str | None,
    until: str | None,
    actor: str | None,
    action: str | None,
    key: str | None,
    run_id: str | None,
    before: int | None,
    limit: int,
    utc: bool,
    as_json: bool,
) -> None:
    """List the audit trail: who cancelled, terminated, retried, forked, purged, changed a
    schedule, or started or signalled a workflow from the command line or the console; when
    (the database's clock) and why. Newest first; entries of purged workflows stay.

    Exit 3 if there is no Sagaway database at the URL.
    """
    actions = _actions(action)
    clock = _format.Clock(utc)
    bounds = _format.time_bounds(since, until, utc=utc)
    rows = with_manager(
        url,
        lambda manager: manager.audit_log(
            key=key,
            run_id=run_id,
            actor=actor,
            action=actions or None,
            since=bounds.get("since"),
            until=bounds.get("until"),
            before=before,
            limit=limit + 1,  # one more: is there a next page?
        ),
    )

    def show(page: list[sw.AuditEntry]) -> None:
        if as_json:
            click.echo(json.dumps([entry_json(e, clock) for e in page], indent=2))
        else:
            _print(page, url, clock, paged=before is not None)

    _format.print_page(rows, limit, show, lambda last: f"--before {last.seq}", as_json)


def _actions(value: str | None) -> list[str]:
    names = [v.strip().lower() for v in (value or "").split(",") if v.strip()]
    unknown = [n for n in names if n not in ACTIONS]
    if unknown:
        raise click.BadParameter(
            f"unknown action {', '.join(unknown)}; use {', '.join(ACTIONS)}",
            param_hint="--action",
        )
    return list(dict.fromkeys(names))


def _print(rows: list[sw.AuditEntry], url: str | None, clock: _format.Clock, paged: bool) -> None:
    table = PlainTable(
        f"audit trail of {mask_url(resolve_url(url))}",
        ("seq", "at", "action", "target", "who", "reason", "details"),
    )
    for e in rows:
        table.add_row(
            str(e.seq),
            clock.text(e.at),
            e.action,
            e.target or "-",
            e.who,
            e.reason or "-",
            details_text(e) or "-",
        )
    table.print(console)
    if not rows:
        console.print("no more entries" if paged else "no entries")
