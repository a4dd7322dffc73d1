"""``sagaway update``, ``pause`` and ``resume``: talking to running workflows.

``update KEY NAME PAYLOAD`` sends an update and waits for the workflow's answer: exit 0 and the
result as JSON when it is accepted, 1 with the reason on stderr when it is rejected (or the
handler failed), 3 for an unknown key. ``pause``/``resume`` hold a workflow still, or (with
``--activity`` / ``--queue``) new attempts of an activity or activity queue in every process;
``pause --list`` shows what is paused.
"""

from __future__ import annotations

import datetime
import json
import sys

import click
from rich.console import Console

import sagaway as sw
from sagaway.cli import _support as support
from sagaway.cli._format import escape, safe_lines
from sagaway.cli._options import Decorator, seconds_option, stacked, stated_reason_option
from sagaway.cli._support import Exit, codec_key_option, reading_codec, url_option, with_manager

console = Console()


@click.command("update")
@url_option
@click.argument("key")
@click.argument("name")
@click.argument("payload", default="null")
@click.option(
    "--update-id",
    help="Names the update: sent again, it is applied once and answered with the same result.",
)
@seconds_option(
    "--timeout",
    default=60.0,
    minimum=0,
    help="How long to wait for the answer (the update stays pending after it).",
)
@codec_key_option
def update(
    url: str | None,
    key: str,
    name: str,
    payload: str,
    update_id: str | None,
    timeout: float,
    codec_key_file: str | None,
) -> None:
    """Send update NAME with a JSON PAYLOAD to the workflow KEY and print its answer.

    The workflow answers where it handles updates of NAME: its validator accepts or rejects the
    payload (a rejection leaves nothing in its history but the rejected request), then its
    handler's result is printed as JSON.

    Exit 0 if accepted, 1 if rejected or the handler failed (the reason on stderr) or no answer
    came within --timeout, 2 if PAYLOAD is not JSON, 3 if there is no such workflow.
    """
    data = support.json_arg(payload, "PAYLOAD", '\'{"approver": "ann"}\'')
    codec = reading_codec(codec_key_file)

    async def go(manager: sw.Manager) -> sw.UpdateResult | str:
        handle = manager.get_workflow(key)
        try:
            return await handle.update(name, data, update_id=update_id, timeout=timeout)
        except sw.UpdateRejected as exc:
            return f"{key}: update {name!r} rejected: {exc.reason}"
        except TimeoutError:
            return (
                f"{key}: no answer to update {name!r} within {timeout:g}s (is a worker "
                "running, and does the workflow handle it?); it stays pending"
            )
        except sw.CompletableError as exc:
            return f"{key}: update {name!r} accepted; its handler failed: {exc}"

    answer = with_manager(url, go, codec=codec)
    if isinstance(answer, str):
        click.echo(safe_lines(answer), err=True)
        sys.exit(int(Exit.REFUSED))
    click.echo(json.dumps(answer.result))


def _target(activity: str | None, queue: str | None) -> tuple[str, str] | None:
    if activity is not None and queue is not None:
        raise click.UsageError("give --activity or --queue, not both")
    if activity is not None:
        return "activity", activity
    if queue is not None:
        return "queue", queue
    return None


async def _switch(
    manager: sw.Manager, key: str | None, target: tuple[str, str] | None, on: bool, reason: str
) -> bool:
    if target is None:
        assert key is not None
        return await (manager.pause if on else manager.resume)(key, reason)
    kind, name = target
    if kind == "activity":
        return await (manager.pause_activity if on else manager.resume_activity)(name, reason)
    return await (manager.pause_queue if on else manager.resume_queue)(name, reason)


def _pause_or_resume(
    url: str | None,
    key: str | None,
    activity: str | None,
    queue: str | None,
    reason: str,
    on: bool,
) -> None:
    target = _target(activity, queue)
    if (key is None) == (target is None):
        raise click.UsageError("give a workflow KEY, or --activity NAME or --queue NAME")

    changed = with_manager(url, lambda manager: _switch(manager, key, target, on, reason))
    named = f"{target[0]} {target[1]}" if target is not None else str(key)
    if changed:
        console.print(f"{escape(named)}: {'paused' if on else 'resumed'}")
        return
    why = "has ended" if on and target is None else ("is paused already" if on else "is not paused")
    click.echo(f"{safe_lines(named)} {why}", err=True)
    sys.exit(int(Exit.REFUSED))


def _switch_options(done: str) -> Decorator:
    """What ``pause`` and ``resume`` take: ``--db``, a workflow KEY or ``--activity`` or
    ``--queue``, and ``--reason`` (by default ``<done> from the command line``)."""
    return stacked(
        url_option,
        click.argument("key", required=False),
        click.option("--activity", metavar="NAME", help="An activity, by registered name."),
        click.option("--queue", metavar="NAME", help="An activity queue (an activity's queue=)."),
        stated_reason_option(done),
    )


@click.command()
@_switch_options("paused")
@click.option("--list", "listing", is_flag=True, help="Show the paused activities and queues.")
def pause(
    url: str | None,
    key: str | None,
    activity: str | None,
    queue: str | None,
    reason: str,
    listing: bool,
) -> None:
    """Pause the workflow KEY, or new attempts of an activity or queue everywhere.

    A paused workflow stops before its next durable call (an activity under way finishes),
    gives its lease and worker slot up, and stays paused across restarts until `sagaway resume
    KEY`. With --activity or --queue no new attempt of it starts in any process (attempts under
    way finish; waiting uses none of a retry policy's attempts) until `sagaway resume
    --activity/--queue`. Recorded in the audit trail.

    Exit 1 if the workflow has ended (or the activity or queue is paused already), 3 if there
    is no such workflow.
    """
    if listing:
        _list(url)
        return
    _pause_or_resume(url, key, activity, queue, reason, True)


@click.command()
@_switch_options("resumed")
def resume(
    url: str | None, key: str | None, activity: str | None, queue: str | None, reason: str
) -> None:
    """Resume a paused workflow KEY (it runs on from where it stopped), or an activity or queue.

    Exit 1 if it was not paused, 3 if there is no such workflow.
    """
    _pause_or_resume(url, key, activity, queue, reason, False)


def _list(url: str | None) -> None:
    paused = with_manager(url, lambda manager: manager.paused_calls())
    if not paused:
        console.print("nothing is paused")
        return
    for p in paused:
        since = datetime.datetime.fromtimestamp(p.paused_at, datetime.UTC).isoformat(
            timespec="seconds"
        )
        console.print(f"{p.kind} {escape(p.name)}: paused since {since} ({escape(p.reason)})")
