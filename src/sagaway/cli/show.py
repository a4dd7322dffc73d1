"""``sagaway show KEY``: one workflow, all an operator needs to see where it is and why.

Its input and result, every step with its output and the error of each failed attempt (not
only the last), the signals sent to it (pending, delivered, rejected with the reason), who holds
its lease and until when, durations in human units and times with their zone. ``--follow``
prints each change (new steps, attempts, status, signals) until the workflow ends, by reading it
again every half second: a read-only command takes no part in the engine's wake-ups.
"""

from __future__ import annotations

import asyncio
import datetime
import json
import sys
import time
from collections.abc import Iterator
from typing import Any

import click
from rich.console import Console

import sagaway as sw
from sagaway._engine import versions
from sagaway.cli import _format
from sagaway.cli._cancel_requests import cancel_json, print_cancel_requests
from sagaway.cli._format import escape
from sagaway.cli._options import json_option, utc_option
from sagaway.cli._support import (
    Exit,
    codec_key_option,
    reading_codec,
    run,
    url_option,
    with_manager,
)
from sagaway.cli._table import PlainTable
from sagaway.cli.audit import entry_json, print_show_audit
from sagaway.cli.listing import summary_json
from sagaway.reading import open_reader

console = Console()
Attributes = dict[str, Any]
"""A workflow's search attributes, name to value (``WorkflowHandle.search_attributes``)."""

POLL_INTERVAL = 0.5
"""Seconds between two reads of a followed workflow."""


@click.command()
@url_option
@codec_key_option
@click.argument("key")
@json_option("Print JSON (with --follow: JSON lines).")
@click.option("--traceback", "show_tb", is_flag=True, help="Show recorded tracebacks.")
@utc_option
@click.option(
    "--export",
    is_flag=True,
    help="Print the execution's history (record and recorded steps, as stored) as JSON, for "
    "sagaway.testing.assert_replays in a unit test.",
)
@click.option(
    "-f",
    "--follow",
    is_flag=True,
    help="Then print each change until the workflow ends; exit 0 if it COMPLETED, 1 if it "
    "FAILED, was CANCELLED or TERMINATED.",
)
def show(
    url: str | None,
    codec_key_file: str | None,
    key: str,
    as_json: bool,
    show_tb: bool,
    utc: bool,
    export: bool,
    follow: bool,
) -> None:
    """Show one workflow: input, result or error, every step with its output and the error of
    each attempt, signals (pending, delivered, rejected and why), lease, durations, and the
    operator actions on it (who, what, when, why: `sagaway audit` lists them all).

    Times are local with their offset (UTC with --utc); JSON gives each as epoch seconds and
    as ISO 8601 (``<field>_iso``). --follow keeps going through SUSPENDED and WAITING (they are
    not ends) until COMPLETED, FAILED, CANCELLED or TERMINATED.
    """
    clock = _format.Clock(utc)
    codec = reading_codec(codec_key_file)
    if export:
        if follow or as_json:
            raise click.UsageError("--export prints JSON of its own: without --json or --follow")
        history = with_manager(url, lambda manager: manager.get_workflow(key).export_history())
        click.echo(json.dumps(history, indent=2))
        return
    if follow:
        sys.exit(int(run(_follow(url, key, clock, as_json, show_tb, codec), url)))

    async def go() -> tuple[sw.WorkflowDescription, Attributes]:
        async with open_reader(url, codec=codec) as reader:  # no engine: a quick start
            return await reader.describe(key), await reader.search_attributes(key)

    d, attributes = run(go(), url)
    if as_json:
        click.echo(json.dumps(show_json(d, clock, attributes), indent=2))
        return
    print_show(d, clock, show_tb, attributes)


# ---------------------------------------------------------------------------- JSON


def show_json(
    d: sw.WorkflowDescription, clock: _format.Clock, attributes: Attributes | None = None
) -> dict[str, Any]:
    """Everything ``show`` prints, as one JSON object (``search_attributes``: each name's
    value, a datetime as ISO 8601 text)."""
    data = summary_json(d, clock)
    data.update(
        search_attributes={k: _attribute_json(v) for k, v in sorted((attributes or {}).items())},
        input=d.input,
        owner=d.owner,
        suspend_count=d.suspend_count,
        duration=_elapsed(d),
        **clock.fields(next_run_at=d.next_run_at, lease_expires_at=d.lease_expires_at),
        steps=[step_json(s, clock) for s in d.steps],
        signals=[signal_json(s, clock) for s in d.signals],
        cancel_requests=[cancel_json(r, clock) for r in d.cancel_requests],
        audit=[entry_json(e, clock) for e in d.audit],
        waits_behind=d.waits_behind,
        ahead_in_line=d.ahead_in_line,
        fairness_weight=d.fairness_weight,
        start_place=d.start_place,
        queue_wait=None
        if d.queue_wait is None
        else dict(zip(("queue", "priority", "ahead"), d.queue_wait, strict=True)),
    )
    return data


def step_json(s: sw.StepDescription, clock: _format.Clock) -> dict[str, Any]:
    return {
        "call_id": s.call_id,
        "kind": s.kind.value,
        "name": s.name,
        "status": s.status.value,
        "attempts": s.attempts,
        "error": s.error,
        "attempt_errors": [{**e, **clock.fields(at=e.get("at"))} for e in s.attempt_errors],
        "result": s.result,
        **clock.fields(started_at=s.started_at, ended_at=s.ended_at),
        "duration": _took(s),
        **(clock.fields(wakes_at=s.wakes_at) if s.wakes_at is not None else {}),
    }


def _took(s: sw.StepDescription) -> float | None:
    """How long the step took; None while it waits, and for a sleep (their ``ended_at`` is a
    deadline, not an end)."""
    if s.kind is sw.StepKind.SLEEP or s.status is sw.StepStatus.WAITING:
        return None
    return s.duration


def signal_json(s: sw.SignalDescription, clock: _format.Clock) -> dict[str, Any]:
    fields = "id name state payload dedupe_id delivered_to rejected sent_at handled_at"
    return clock.record(s, fields)


def _attribute_json(value: Any) -> Any:
    return value.isoformat() if isinstance(value, datetime.datetime) else value


def _attributes_text(attributes: Attributes) -> str:
    """``customer="4711"  amount=120.5  vip=true``: each as a ``--where`` filter writes it."""
    parts = []
    for name, value in sorted(attributes.items()):
        shown = json.dumps(_attribute_json(value))
        if isinstance(value, datetime.datetime):
            shown = value.isoformat()
        parts.append(f"{name}={shown}")
    return escape("  ".join(parts))


def _elapsed(d: sw.WorkflowDescription) -> float:
    """Seconds from creation to the end, or to now while it has not ended."""
    return (d.ended_at if d.ended_at is not None else time.time()) - d.created_at


# ---------------------------------------------------------------------------- text


def _line(label: str, text: str) -> None:
    console.print(f"{label:<9}{text}", soft_wrap=True, highlight=False)


def _value(value: Any) -> str:
    return escape(_format.clip(json.dumps(value)))


def _error(error: dict[str, Any]) -> str:
    kind, message = str(error.get("type")), str(error.get("message"))
    return f"[red]{escape(kind)}[/red]: {escape(message)}"


def print_show(
    d: sw.WorkflowDescription,
    clock: _format.Clock,
    show_tb: bool,
    attributes: Attributes | None = None,
) -> None:
    console.print(
        f"[bold]{escape(d.key)}[/bold]  workflow {escape(d.name)}  run {d.run_id}", soft_wrap=True
    )
    span = "after" if d.status.ended else "for"
    paused = "  [yellow]paused[/yellow] (sagaway resume KEY)" if d.paused else ""
    took = _format.duration(_elapsed(d))
    _line("status", f"{_format.styled(d.status.value)}  ({span} {took}){paused}")
    _line("version", escape(versions.label(d.code_version)))
    _line("created", clock.text(d.created_at))
    _line("updated", clock.text(d.updated_at))
    if d.ended_at is not None:
        _line("ended", clock.text(d.ended_at))
    for label, text in _relations(d, clock):
        _line(label, text)
    for problem in d.problems:
        _line("[red]unreadable[/red]", escape(problem))
    if attributes:
        _line("search", _attributes_text(attributes))
    _line("input", _value(d.input))
    if d.result is not None or d.status is sw.WorkflowStatus.COMPLETED:
        _line("result", _value(d.result))
    if d.error:
        _line("error", _error(d.error))
        if show_tb and d.error.get("traceback"):
            console.print(_format.safe_lines(d.error["traceback"]), markup=False, highlight=False)
    _steps_table(d, clock).print(console)
    _print_step_details(d.steps, clock, show_tb)
    if d.signals:
        _print_signals(d.signals, clock)
    if d.cancel_requests:
        print_cancel_requests(console, d.cancel_requests, clock)
    if d.audit:
        print_show_audit(console, d.audit, clock)


def _priority(d: sw.WorkflowDescription) -> Iterator[tuple[str, str]]:
    """Its priority and fairness key, if it has them or waits to start; and, while it waits
    PENDING, its place among the due starts."""
    pending = d.status is sw.WorkflowStatus.PENDING
    if pending or d.priority != 3 or d.fairness_key is not None:
        tenant = (
            ""
            if d.fairness_key is None
            else f"  fairness key {escape(d.fairness_key)} (weight {d.fairness_weight:g})"
        )
        yield "priority", f"{d.priority} (1 lowest .. 5 highest){tenant}"
    if pending and d.start_place is not None:
        ahead = "next" if d.start_place == 0 else f"{d.start_place} due start(s) go first"
        yield "queued", f"waits for a free worker slot: {ahead}"
    if d.queue_wait is not None:
        queue, level, ahead_of = d.queue_wait
        yield "queued", f"waits for queue {escape(queue)}, priority {level}, {ahead_of} ahead"


def _relations(d: sw.WorkflowDescription, clock: _format.Clock) -> Iterator[tuple[str, str]]:
    """Lines about where the workflow stands: parent, children, wait, lease, retry."""
    if d.parent_key:
        yield "parent", escape(d.parent_key)
    if d.children:
        yield "children", escape(", ".join(d.children))
    if d.waiting_for:
        until = f" (until {clock.text(d.next_run_at)})" if d.next_run_at else ""
        yield "waiting", f"for {escape(d.waiting_for)}{until}"
    yield from _flow(d, clock)
    if d.owner:
        yield "lease", f"held by {escape(d.owner)}{_expiry(d.lease_expires_at, clock)}"
    yield from _priority(d)
    if d.status is sw.WorkflowStatus.SUSPENDED:
        yield (
            "retry at",
            f"{clock.text(d.next_run_at)} (suspended {d.suspend_count}x; "
            f"`sagaway retry {escape(d.key)}` to retry now)",
        )


def _flow(d: sw.WorkflowDescription, clock: _format.Clock) -> Iterator[tuple[str, str]]:
    """Its per-key order (its place in line) and its debounce (when it starts)."""
    if d.ordering_key is not None:
        key = escape(d.ordering_key)
        if d.waits_behind is not None:
            place = f"waits behind {escape(d.waits_behind)} ({d.ahead_in_line} ahead)"
        elif d.ahead_in_line == 0:
            place = "first in line"
        else:
            place = "out of the line (ended)"
        yield "order", f"key {key}, {place}"
    if d.debounce_key is not None:
        key = escape(d.debounce_key)
        if d.status is sw.WorkflowStatus.PENDING and d.next_run_at is not None:
            yield "debounce", f"key {key}, starts {clock.text(d.next_run_at)} unless started again"
        else:
            yield "debounce", f"key {key} (started: a new start begins a new burst)"


def _expiry(expires_at: float | None, clock: _format.Clock) -> str:
    if expires_at is None:
        return ""
    left = expires_at - time.time()
    if left >= 0:
        return f", expires {clock.text(expires_at)} (in {_format.duration(left)})"
    return f", expired {clock.text(expires_at)} ({_format.duration(-left)} ago)"


def _steps_table(d: sw.WorkflowDescription, clock: _format.Clock) -> PlainTable:
    table = PlainTable("steps", ("#", "kind", "name", "status", "tries", "at", "took"))
    for s in d.steps:
        took = _took(s)
        table.add_row(
            s.call_id,
            s.kind.value,
            s.name,
            _format.status_text(s.status.value),
            str(s.attempts),
            "+" + _format.duration(s.started_at - d.created_at),
            "-" if took is None else _format.duration(took),
        )
    return table


def _print_step_details(
    steps: list[sw.StepDescription], clock: _format.Clock, show_tb: bool
) -> None:
    """Each step's output or last error, then the error of each failed attempt (lines, not
    table cells: they are long, and searched for)."""
    detailed = [s for s in steps if s.result is not None or s.error or s.attempt_errors]
    if not detailed:
        return
    console.print("[bold]outputs and errors[/bold] (every failed attempt, oldest first)")
    for s in detailed:
        outcome = f"error {_error(s.error)}" if s.error else _output(s.result, s.wakes_at, clock)
        console.print(f"  {s.call_id} {escape(s.name)}  {outcome}", soft_wrap=True, highlight=False)
        for e in s.attempt_errors:
            at = clock.text(e.get("at"))
            line = f"    attempt {e.get('attempt')}  {at}  {_error(e)}"
            console.print(line, soft_wrap=True, highlight=False)
            if show_tb and e.get("traceback"):
                console.print(_format.safe_lines(e["traceback"]), markup=False, highlight=False)


def _output(result: Any, wakes: float | None, clock: _format.Clock) -> str:
    """A step's output: a sleep's is its wake-up time."""
    return f"output {_value(result)}" if wakes is None else f"wakes {clock.text(wakes)}"


def _print_signals(signals: list[sw.SignalDescription], clock: _format.Clock) -> None:
    """One line per signal; a rejected one's reason (often several lines) below it."""
    console.print("[bold]signals[/bold] (in the order sent)")
    for s in signals:
        if s.state == "delivered":
            detail = f"  to step {s.delivered_to} at {clock.text(s.handled_at)}"
        elif s.state == "pending":
            detail = "  not received yet"
        else:
            detail = f"  at {clock.text(s.handled_at)}"
        console.print(
            f"  #{s.id} {escape(s.name)}  {_format.styled(s.state)}  sent {clock.text(s.sent_at)}"
            f"{detail}  payload {_value(s.payload)}",
            soft_wrap=True,
            highlight=False,
        )
        if s.rejected:
            reason = "\n".join(f"      {escape(line)}" for line in s.rejected.splitlines())
            console.print(f"[red]{reason}[/red]", soft_wrap=True, highlight=False)


# ---------------------------------------------------------------------------- --follow


async def _follow(
    url: str | None,
    key: str,
    clock: _format.Clock,
    as_json: bool,
    show_tb: bool,
    codec: sw.codecs.Chain | None = None,
) -> Exit:
    """Print the workflow, then each change, until it ends; its exit code."""
    async with open_reader(url, codec=codec) as reader:
        d, attributes = await reader.describe(key), await reader.search_attributes(key)
        if as_json:
            click.echo(json.dumps({"event": "workflow", **show_json(d, clock, attributes)}))
        else:
            print_show(d, clock, show_tb, attributes)
        while not d.status.ended:
            await asyncio.sleep(POLL_INTERVAL)
            before, d = d, await reader.describe(key)
            for event in follow_events(before, d, clock):
                if as_json:
                    click.echo(json.dumps(event))
                else:
                    _print_event(event, clock)
    return Exit.OK if d.status is sw.WorkflowStatus.COMPLETED else Exit.REFUSED


def follow_events(
    before: sw.WorkflowDescription, after: sw.WorkflowDescription, clock: _format.Clock
) -> list[dict[str, Any]]:
    """What changed between two reads, in the order it happened (see ``event_time``)."""
    return sorted(_changes(before, after, clock), key=event_time)


def _changes(
    before: sw.WorkflowDescription, after: sw.WorkflowDescription, clock: _format.Clock
) -> Iterator[dict[str, Any]]:
    """What changed between two reads: steps new or changed, signals, then the status."""
    seen = {s.call_id: (s.status, s.attempts) for s in before.steps}
    for s in after.steps:
        if seen.get(s.call_id) != (s.status, s.attempts):
            yield {"event": "step", **step_json(s, clock)}
    signals = {s.id: s.state for s in before.signals}
    for sig in after.signals:
        if signals.get(sig.id) != sig.state:
            yield {"event": "signal", **signal_json(sig, clock)}
    if (before.status, before.waiting_for) != (after.status, after.waiting_for):
        yield {
            "event": "status",
            "status": after.status.value,
            "ended": after.status.ended,
            "waiting_for": after.waiting_for,
            "error": after.error,
            "result": after.result,
            "duration": _elapsed(after),
            **clock.fields(updated_at=after.updated_at),
        }


def event_time(event: dict[str, Any]) -> float:
    """When it happened: a step's end (its start while it waits, its ``ended_at`` then a
    deadline, and for a sleep, recorded with its wake-up time as it began), a signal's
    delivery or rejection (else its sending), a status's update."""
    if event["event"] == "step":
        waiting = event["status"] == sw.StepStatus.WAITING.value or event["ended_at"] is None
        slept = event.get("wakes_at") is not None and event["ended_at"] == event["wakes_at"]
        return float(event["started_at"] if waiting or slept else event["ended_at"])
    if event["event"] == "signal":
        return float(event["handled_at"] or event["sent_at"])
    return float(event["updated_at"])


def _print_event(event: dict[str, Any], clock: _format.Clock) -> None:
    kind = event["event"]
    when = clock.text(event_time(event))
    if kind == "step":
        text = f"step {event['call_id']} {escape(event['name'])} {_format.styled(event['status'])}"
        text += f" (attempt {event['attempts']})"
        if event["error"]:
            text += f"  {_error(event['error'])}"
        elif event["result"] is not None:
            wakes = event.get("wakes_at")
            text += (
                f"  → {_value(event['result'])}"
                if wakes is None
                else f"  → wakes {clock.text(wakes)}"
            )
    elif kind == "signal":
        text = f"signal {escape(event['name'])} #{event['id']} {_format.styled(event['state'])}"
        if event["rejected"]:
            text += f": {escape(event['rejected'])}"
    else:
        text = f"status {_format.styled(event['status'])}"
        if event["waiting_for"]:
            text += f" for {escape(event['waiting_for'])}"
        if event["ended"]:
            text += f" after {_format.duration(event['duration'])}"
        if event["error"]:
            text += f"  {_error(event['error'])}"
    console.print(f"{when}  {text}", soft_wrap=True, highlight=False)
