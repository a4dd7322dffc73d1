"""``sagaway list``: workflows, newest first, filtered and paged by the database.

Every filter (statuses, name, key prefix, code version, creation time) is a condition of the
store's query, and pages are keyset pages: ``--after CURSOR`` continues after the last row of
the previous page (``created_at``, then ``run_id``), so paging through a table that grows
meanwhile shows every row once.
"""

from __future__ import annotations

import json
from typing import Any

import click
from rich.console import Console

import sagaway as sw
from sagaway import search
from sagaway._engine import versions
from sagaway.cli import _format
from sagaway.cli._options import (
    json_option,
    key_prefix_option,
    limit_option,
    name_option,
    priority_option,
    utc_option,
)
from sagaway.cli._support import codec_key_option, mask_url, reading_codec, run, url_option
from sagaway.cli._table import PlainTable
from sagaway.reading import open_reader
from sagaway.store import resolve_url

console = Console()


def parse_statuses(value: str | None) -> list[sw.WorkflowStatus]:
    """``--status S[,S...]``, checked."""
    names = [v.strip().upper() for v in (value or "").split(",") if v.strip()]
    known = {s.value for s in sw.WorkflowStatus}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise click.BadParameter(
            f"unknown status {', '.join(unknown)}; use {', '.join(sorted(known))}",
            param_hint="--status",
        )
    return [sw.WorkflowStatus(n) for n in dict.fromkeys(names)]


def summary_json(d: sw.WorkflowDescription, clock: _format.Clock) -> dict[str, Any]:
    """One workflow in ``list --json`` (and the head of ``show --json``)."""
    return {
        "key": d.key,
        "run_id": d.run_id,
        "workflow": d.name,
        "status": d.status.value,
        "paused": d.paused,
        "parent_key": d.parent_key,
        "code_version": d.code_version,
        "ordering_key": d.ordering_key,
        "ordering_seq": d.ordering_seq,
        "debounce_key": d.debounce_key,
        "priority": d.priority,
        "fairness_key": d.fairness_key,
        **clock.fields(created_at=d.created_at, updated_at=d.updated_at, ended_at=d.ended_at),
        "error": d.error,
        "result": d.result,
        "children": d.children,
        "waiting_for": d.waiting_for,
        "problems": d.problems,
        "cursor": d.cursor,
    }


@click.command("list")
@url_option
@click.option(
    "--status",
    metavar="S[,S...]",
    help="Only these statuses, comma-separated (e.g. SUSPENDED,FAILED).",
)
@name_option
@key_prefix_option
@click.option(
    "--ordering-key",
    help="Only workflows started with this ordering key (with --status of the live ones: "
    "its line).",
)
@click.option("--debounce-key", help="Only workflows started with this debounce key.")
@priority_option("Only workflows of this priority (1 lowest .. 5 highest).")
@click.option("--fairness-key", help="Only workflows started with this fairness key.")
@click.option(
    "--version",
    "code_versions",
    metavar="V[,V...]",
    help="Only workflows created by these code versions ('unversioned': without one).",
)
@click.option(
    "--since",
    metavar="WHEN",
    help="Only workflows created at or after WHEN: an ISO 8601 date or date-time "
    "(2026-12-01, 2026-12-01T10:30, 2026-12-01T10:30+01:00) or a duration ago (90s, 15m, 2h, "
    "3d, 1w).",
)
@click.option("--until", metavar="WHEN", help="Only workflows created before WHEN (as --since).")
@click.option(
    "--where",
    "--attr",
    "where",
    multiple=True,
    metavar="NAME=VALUE",
    help="Only workflows whose search attribute matches (repeatable, all must match): "
    "customer=4711, amount>=100, region=eu, vip=true, placed>=2026-12-01T00:00+00:00; quote a "
    'value to mean the text only (customer="4711").',
)
@click.option(
    "--after",
    metavar="CURSOR",
    help="The next page: the cursor printed under the previous page (or a row's cursor in JSON).",
)
@limit_option("At most this many, newest first (a page; 0 is refused).")
@utc_option
@json_option()
@click.option("--jsonl", "as_jsonl", is_flag=True, help="Print one JSON object per line.")
@codec_key_option
def list_cmd(
    url: str | None,
    status: str | None,
    name: str | None,
    key_prefix: str | None,
    code_versions: str | None,
    since: str | None,
    until: str | None,
    where: tuple[str, ...],
    after: str | None,
    limit: int,
    utc: bool,
    as_json: bool,
    as_jsonl: bool,
    codec_key_file: str | None,
    **flow: Any,
) -> None:
    """List workflows, newest first, a page at a time.

    When more workflows match than --limit, the next page's command is printed (on stderr with
    --json/--jsonl, whose output stays one JSON document). Naive dates and times are local
    (UTC with --utc); --since is inclusive, --until exclusive.
    """
    if as_json and as_jsonl:
        raise click.UsageError("--json and --jsonl exclude each other")
    wanted = parse_statuses(status)
    try:
        chosen = None if code_versions is None else versions.parse_versions(code_versions)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--version") from None
    try:
        search.filters(where)  # checked here, for a message that names the option
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--where") from None
    clock = _format.Clock(utc)
    bounds = _format.time_bounds(since, until, utc=utc)
    codec = reading_codec(codec_key_file)

    async def go() -> list[sw.WorkflowDescription]:
        async with open_reader(url, codec=codec) as reader:  # no engine: a quick start
            return await reader.list_workflows(
                status=wanted,
                name=name,
                key_prefix=key_prefix,
                code_versions=chosen,
                since=bounds.get("since"),
                until=bounds.get("until"),
                after=after,
                where=list(where) or None,
                limit=limit + 1,  # one more: is there a next page?
                **flow,  # ordering_key, debounce_key, priority, fairness_key
            )

    _print_page(run(go(), url), limit, url, clock, after is not None, as_json, as_jsonl)


def _print_page(
    rows: list[sw.WorkflowDescription],
    limit: int,
    url: str | None,
    clock: _format.Clock,
    paged: bool,
    as_json: bool,
    as_jsonl: bool,
) -> None:
    """Print up to ``limit`` of ``rows`` (one more was read: then the next page's option)."""

    def show(page: list[sw.WorkflowDescription]) -> None:
        if as_json:
            click.echo(json.dumps([summary_json(row, clock) for row in page], indent=2))
        elif as_jsonl:
            for row in page:
                click.echo(json.dumps(summary_json(row, clock)))
        else:
            _print_list(page, url, clock, paged)

    _format.print_page(
        rows, limit, show, lambda last: f"--after {last.cursor}", as_json or as_jsonl
    )


def flow_text(d: sw.WorkflowDescription, clock: _format.Clock) -> str:
    """Its ordering key and place number, its debounce key and (PENDING) when it starts."""
    parts = []
    if d.ordering_key is not None:
        parts.append(f"order {d.ordering_key} #{d.ordering_seq}")
    if d.debounce_key is not None:
        pending = d.status is sw.WorkflowStatus.PENDING and d.next_run_at is not None
        starts = f", starts {clock.text(d.next_run_at)}" if pending else ""
        parts.append(f"debounce {d.debounce_key}{starts}")
    return "; ".join(parts) or "-"


def _print_list(
    rows: list[sw.WorkflowDescription], url: str | None, clock: _format.Clock, paged: bool
) -> None:
    flow = any(row.ordering_key or row.debounce_key for row in rows)  # a column if any
    # A priority column only when a row has one of its own (or a fairness key).
    ranked = any(row.priority != 3 or row.fairness_key is not None for row in rows)
    table = PlainTable(
        f"workflows in {mask_url(resolve_url(url))}",
        ("key", "workflow", "status", "version", "created", "updated", *(("flow",) * flow))
        + (("priority",) if ranked else ()),
    )
    for row in rows:
        table.add_row(
            row.key,
            row.name,
            _format.status_text(row.status.value) + (" (paused)" if row.paused else ""),
            "-" if row.code_version is None else row.code_version,
            clock.text(row.created_at),
            clock.text(row.updated_at),
            *((flow_text(row, clock),) * flow),
            *((_priority_text(row),) if ranked else ()),
        )
    table.print(console)
    if not rows:
        console.print("no more workflows" if paged else "no workflows")


def _priority_text(row: sw.WorkflowDescription) -> str:
    """``5``, or ``3 acme`` with a fairness key (``acme x2`` with a weight)."""
    weight = "" if row.fairness_weight == 1 else f" x{row.fairness_weight:g}"
    tenant = "" if row.fairness_key is None else f" {row.fairness_key}{weight}"
    return f"{row.priority}{tenant}"
