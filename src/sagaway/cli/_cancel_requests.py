"""The cancel requests of a workflow in ``sagaway show``: each with its reason, when it came,
and where it was delivered, or why not."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.markup import escape

import sagaway as sw
from sagaway.cli import _format


def cancel_json(r: sw.CancelRequestDescription, clock: _format.Clock) -> dict[str, Any]:
    fields = "reason state accepted delivered_call delivered_where why requested_at delivered_at"
    return clock.record(r, fields)


def print_cancel_requests(
    console: Console, requests: list[sw.CancelRequestDescription], clock: _format.Clock
) -> None:
    """One line per request: when, why, and what became of it."""
    console.print("[bold]cancel requests[/bold] (in the order made)")
    for r in requests:
        if r.delivered_call is not None:
            fate = (
                f"delivered at step {r.delivered_call} ({escape(r.delivered_where or '')}) "
                f"at {clock.text(r.delivered_at)}"
            )
        else:
            fate = escape(r.why or "")
        console.print(
            f"  {clock.text(r.requested_at)}  {escape(repr(r.reason))}  {r.state}: {fate}",
            soft_wrap=True,
            highlight=False,
        )
        if r.delivered_call is not None and r.why:
            console.print(f"      {escape(r.why)}", soft_wrap=True, highlight=False)
