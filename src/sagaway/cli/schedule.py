"""``sagaway schedule``: list, pause, resume, trigger and delete schedules.

Schedules are created by code (``register_workflow(schedule=...)``, ``manager.schedule``),
which knows the workflow and its arguments; operators look at them and steer them here.
``delete`` asks first on a terminal and needs ``--yes`` without one, as ``purge`` does.
"""

from __future__ import annotations

import datetime
import json
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from sagaway.cli._format import escape
from sagaway.cli._options import Decorator, json_option, stacked, yes_option
from sagaway.cli._support import (
    EXIT_CODES_HELP,
    can_ask,
    confirm,
    mask_url,
    reason_option,
    url_option,
    with_manager,
)
from sagaway.store import resolve_url
from sagaway.store.records import ScheduleRecord

console = Console()


def _at(epoch: float | None) -> str | None:
    if epoch is None:
        return None
    return datetime.datetime.fromtimestamp(epoch, datetime.UTC).isoformat(timespec="seconds")


def as_json(schedule: ScheduleRecord) -> dict[str, Any]:
    return {
        "id": schedule.id,
        "workflow": schedule.workflow,
        "args": json.loads(schedule.args),
        "cron": schedule.cron,
        "timezone": schedule.timezone,
        "catch_up": schedule.catch_up,
        "paused": schedule.paused,
        "next_tick_at": _at(schedule.next_tick_at),
        "last_tick_at": _at(schedule.last_tick_at),
    }


@click.group("schedule", epilog=EXIT_CODES_HELP)
def schedule_command() -> None:
    """Look at and steer schedules (workflows started at the ticks of a cron expression).

    Exit 3 for an unknown schedule id.
    """


def _steering(*extra: Decorator) -> Decorator:
    """A command on one schedule: ``--db``, its ``ID``, ``extra`` options and ``--reason``."""
    return stacked(url_option, click.argument("schedule_id", metavar="ID"), *extra, reason_option)


@schedule_command.command("list")
@url_option
@json_option(dest="json_out")
def list_schedules(url: str | None, json_out: bool) -> None:
    """List the schedules, by id."""
    found = with_manager(url, lambda manager: manager.list_schedules())
    if json_out:
        click.echo(json.dumps([as_json(s) for s in found]))
        return
    table = Table(title=f"schedules in {escape(mask_url(resolve_url(url)))}")
    for column in ("id", "workflow", "cron", "timezone", "catch-up", "state", "next tick (UTC)"):
        table.add_column(column)
    for s in found:
        state = "[yellow]paused[/]" if s.paused else "[green]active[/]"
        row = (s.id, s.workflow, s.cron, s.timezone, s.catch_up)
        table.add_row(*map(escape, row), state, _at(s.next_tick_at) or "")
    console.print(table)


@schedule_command.command()
@_steering()
def pause(url: str | None, schedule_id: str, reason: str | None) -> None:
    """Stop starting executions of schedule ID (running ones go on)."""
    with_manager(url, lambda manager: manager.pause_schedule(schedule_id, reason=reason))
    console.print(f"{escape(schedule_id)}: paused")


@schedule_command.command()
@_steering()
def resume(url: str | None, schedule_id: str, reason: str | None) -> None:
    """Start executions of schedule ID again, from its next tick (ticks of the pause are not
    run)."""
    stored = with_manager(url, lambda m: m.resume_schedule(schedule_id, reason=reason))
    console.print(f"{escape(schedule_id)}: active, next tick at {_at(stored.next_tick_at)} UTC")


@schedule_command.command()
@_steering()
def trigger(url: str | None, schedule_id: str, reason: str | None) -> None:
    """Start one execution of schedule ID now (key schedule:ID:manual:UUID); a running worker
    runs it."""
    handle = with_manager(url, lambda m: m.trigger_schedule(schedule_id, reason=reason))
    click.echo(handle.key)


@schedule_command.command()
@_steering(yes_option)
def delete(url: str | None, schedule_id: str, yes: bool, reason: str | None) -> None:
    """Delete schedule ID (its executions stay). Asks on a terminal; without one, deletes only
    with --yes (exit 2 otherwise). Answering no exits 1. A schedule declared in code is written
    again when its workers start: remove it from the code too."""
    if not yes:
        confirm(f"delete schedule {schedule_id!r}?", asking=can_ask(), verb="delete")
    with_manager(url, lambda manager: manager.delete_schedule(schedule_id, reason=reason))
    console.print(f"{escape(schedule_id)}: deleted")
