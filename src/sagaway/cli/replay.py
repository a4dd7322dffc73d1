"""``sagaway replay``: check new workflow code against the recorded histories before deploying.

Each execution's recorded steps are replayed against the workflows registered by the module's
Manager, running no activity and writing nothing; an execution whose history the code would not
replay is reported with the step, what was recorded there and what the code asks for instead.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import click
from rich.console import Console
from rich.table import Table

import sagaway as sw
from sagaway.cli import _format
from sagaway.cli._format import escape
from sagaway.cli._support import Exit, load_manager, run, url_option
from sagaway.store import resolve_url

console = Console()
_VERDICTS = {"ok": "[green]ok[/]", "diverged": "[red]DIVERGES[/]"}


@click.command()
@url_option
@click.argument("target", metavar="MODULE:MANAGER")
@click.option("--key", "keys", multiple=True, help="Check this execution (repeatable).")
@click.option("--all-live", is_flag=True, help="Check every live execution (not ended).")
@click.option(
    "--ended-since",
    metavar="WHEN",
    help="With --all-live: ended executions created since WHEN too (7d, 2026-11-01, ...).",
)
@click.option("--json", "as_json", is_flag=True, help="One JSON object per execution.")
def replay(
    url: str | None,
    target: str,
    keys: tuple[str, ...],
    all_live: bool,
    ended_since: str | None,
    as_json: bool,
) -> None:
    """Replay recorded executions against the code of MODULE:MANAGER; exit 1 if any diverges.

    Nothing runs (no activity is called) and nothing is written: each execution's recorded
    durable calls are matched against the calls the new code makes, up to where its history
    ends. A divergence names the step, the recorded call and the new one; deploy such a change
    behind `sw.patched(...)` (docs/patching.md).
    """
    if bool(keys) == all_live:
        raise click.UsageError("give --key KEY (repeatable) or --all-live")
    if ended_since is not None and not all_live:
        raise click.UsageError("--ended-since goes with --all-live")
    since = None
    if ended_since is not None:
        since = _format.parse_time(ended_since, utc=False, option="--ended-since")
    manager = load_manager(target)
    if url is not None:
        manager.url = resolve_url(url)

    async def go() -> list[sw.ReplayReport]:
        async with manager.connect(create=False):
            if all_live:
                return await manager.check_replays(ended=since is not None, since=since)
            return [await manager.get_workflow(k).check_replay() for k in keys]

    reports = run(go(), manager.url)
    if as_json:
        for report in reports:
            click.echo(json.dumps(_json(report)))
    else:
        _print(reports)
    if any(r.verdict != "ok" for r in reports):
        sys.exit(int(Exit.REFUSED))


def _json(report: sw.ReplayReport) -> dict[str, Any]:
    return {
        "key": report.key,
        "run_id": report.run_id,
        "workflow": report.workflow,
        "status": report.status.value,
        "verdict": report.verdict,
        "replayed": report.replayed,
        "recorded": report.recorded,
        "call_id": report.call_id,
        "recorded_call": report.recorded_call,
        "requested_call": report.requested_call,
        "message": report.message,
    }


def _print(reports: list[sw.ReplayReport]) -> None:
    if not reports:
        console.print("no executions to check")
        return
    table = Table(box=None, pad_edge=False)
    for column in ("KEY", "WORKFLOW", "STATUS", "VERDICT", "STEP", "RECORDED", "CODE ASKS"):
        table.add_column(column)
    for r in reports:
        verdict = _VERDICTS.get(r.verdict, "[red]error[/]")
        table.add_row(
            escape(r.key),
            escape(r.workflow),
            _format.styled(r.status.value),
            verdict,
            r.call_id or "",
            escape(r.recorded_call or ""),
            escape(r.requested_call or ("(nothing: the code ends)" if r.call_id else "")),
        )
    console.print(table)
    bad = [r for r in reports if r.verdict != "ok"]
    for r in bad:
        console.print(f"\n[bold]{escape(r.key)}[/]: {escape(r.message)}", soft_wrap=True)
    console.print(
        f"\n{len(reports) - len(bad)} of {len(reports)} executions replay on this code"
        + (f"; {len(bad)} would not" if bad else "")
    )
