"""The operator's commands on workflows: ``count``, ``retry``, ``cancel``, ``terminate`` and
``signal`` (each a one-off request through a Manager that creates nothing)."""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Awaitable, Callable

import click
from rich.console import Console
from rich.table import Table

import sagaway as sw
from sagaway.cli import _delivery, _format
from sagaway.cli import _support as support
from sagaway.cli._format import escape
from sagaway.cli._options import json_option, seconds_option, stated_reason_option
from sagaway.cli._support import (
    Exit,
    codec_key_option,
    mask_url,
    reading_codec,
    reason_option,
    url_option,
    with_manager,
)
from sagaway.store import resolve_url

console = Console()
err_console = Console(stderr=True)


# ---------------------------------------------------------------------------- inspection


@click.command()
@url_option
@json_option("Print one JSON object.")
def count(url: str | None, as_json: bool) -> None:
    """Count workflows per status."""
    counts = with_manager(url, lambda manager: manager.count_workflows())
    data = {s.value: counts.get(s, 0) for s in sw.WorkflowStatus}
    if as_json:
        click.echo(json.dumps({**data, "total": sum(data.values())}))
        return
    table = Table(title=f"workflows in {escape(mask_url(resolve_url(url)))}")
    table.add_column("status")
    table.add_column("count", justify="right")
    for status, n in data.items():
        table.add_row(_format.styled(status), str(n))
    table.add_row("total", str(sum(data.values())))
    console.print(table)


# ---------------------------------------------------------------------------- operations


def _refused(message: str) -> None:
    err_console.print(escape(message), highlight=False)
    sys.exit(int(Exit.REFUSED))


def _request(
    url: str | None, key: str, request: Callable[[sw.Manager], Awaitable[bool]]
) -> tuple[bool, sw.WorkflowStatus]:
    """Make an operator request on the workflow under ``key``: whether it changed anything,
    and the workflow's status afterwards (for the message when it did not)."""

    async def go(manager: sw.Manager) -> tuple[bool, sw.WorkflowStatus]:
        changed = await request(manager)
        return changed, await manager.get_workflow(key).status()

    return with_manager(url, go)


@click.command()
@url_option
@click.argument("key")
@reason_option
def retry(url: str | None, key: str, reason: str | None) -> None:
    """Make a SUSPENDED workflow due now (a running worker picks it up).

    Exit 1 if it is not SUSPENDED, 3 if there is no such workflow.
    """

    changed, status = _request(url, key, lambda manager: manager.retry(key, reason=reason))
    if changed:
        console.print(f"{escape(key)}: will be retried by the next worker scan")
    else:
        _refused(f"{key} is {status.value}, not SUSPENDED: nothing to retry")


@click.command()
@url_option
@click.argument("key")
@stated_reason_option(
    "cancelled",
    "Why: the workflow's cancel reason, also kept in the audit trail (sagaway audit).",
)
@click.option("--wait", is_flag=True, help="Wait until it has ended; print how.")
def cancel(url: str | None, key: str, reason: str, wait: bool) -> None:
    """Ask a live workflow to cancel, undoing what it did.

    At its next durable call or wait the workflow sees sagaway.Cancelled; its Saga runs the
    compensations of the steps done, in reverse order, and it ends CANCELLED. An activity
    already running finishes first; compensations under way are not interrupted. To stop a
    workflow at once without compensating, use `sagaway terminate`.

    Exit 1 if it had already ended (or, with --wait, if it ended other than CANCELLED), 3 if
    there is no such workflow.
    """

    changed, status = _request(url, key, lambda manager: manager.cancel(key, reason))
    if not changed:
        _refused(f"{key} had already ended ({status.value})")
    if not wait:
        console.print(
            f"{escape(key)}: cancel requested; it compensates and ends CANCELLED "
            f"(follow with `sagaway show {escape(key)}`)"
        )
        return

    async def ended(manager: sw.Manager) -> sw.WorkflowStatus:
        handle = manager.get_workflow(key)
        with contextlib.suppress(Exception):
            await handle.result()
        return await handle.status()

    final = with_manager(url, ended)
    if final is not sw.WorkflowStatus.CANCELLED:
        _refused(f"{key} ended {final.value} (cancellation is cooperative)")
    console.print(f"{escape(key)}: CANCELLED")


@click.command()
@url_option
@click.argument("key")
@stated_reason_option(
    "terminated", "Why: recorded as its error, and in the audit trail (sagaway audit)."
)
def terminate(url: str | None, key: str, reason: str) -> None:
    """End a live workflow now as TERMINATED: no compensation runs, the reason is recorded.

    Exit 1 if it had already ended, 3 if there is no such workflow.
    """

    changed, status = _request(url, key, lambda manager: manager.terminate(key, reason))
    if changed:
        console.print(f"{escape(key)}: TERMINATED ({escape(reason)})")
    else:
        _refused(f"{key} had already ended ({status.value})")


@click.command("signal")
@url_option
@click.argument("key")
@click.argument("name")
@click.argument("payload", default="null")
@click.option("--dedupe-id", help="Deliver at most once per workflow for this id.")
@reason_option
@seconds_option(
    "--wait-delivery",
    "wait",
    default=2.0,
    minimum=0,
    help="When the workflow is waiting for this signal, wait this long to report whether it "
    "was delivered or rejected (0: do not wait).",
)
@codec_key_option
def signal_cmd(
    url: str | None,
    key: str,
    name: str,
    payload: str,
    dedupe_id: str | None,
    reason: str | None,
    wait: float,
    codec_key_file: str | None,
) -> None:
    """Send signal NAME with a JSON PAYLOAD to the workflow KEY.

    The payload is checked against the type the workflow receives when it receives it. If the
    workflow is waiting for NAME, this waits (--wait-delivery) to say whether it was delivered
    or rejected; else `sagaway show KEY` tells later (pending, delivered, or rejected and why).
    If it waits for a signal of another name, the signal is kept all the same, and a note on
    stderr names the one it waits for.

    Exit 1 if the workflow rejected it (or had ended), 2 if PAYLOAD is not JSON, 3 if there is
    no such workflow. A --dedupe-id sent before exits 0 ("already sent"), even once the
    workflow has ended. The signal is recorded in the audit trail (who, when, --reason).
    """
    data = support.json_arg(payload, "PAYLOAD", "'{\"ok\": true}'")
    codec = reading_codec(codec_key_file)  # with keys, the payload is stored encrypted

    sent = with_manager(
        url,
        lambda manager: _delivery.send(manager, key, name, data, dedupe_id, wait, reason),
        codec=codec,
        audit="all",
    )
    _report_signal(sent, key, name, dedupe_id, wait)


def _report_signal(
    sent: _delivery.Sent, key: str, name: str, dedupe_id: str | None, wait: float
) -> None:
    """Say what became of a sent signal (exit 1 if the workflow rejected it)."""
    what = f"{escape(key)}: signal {escape(repr(name))}"
    if not sent.stored:
        console.print(f"{what} with dedupe id {escape(repr(dedupe_id))} was already sent")
    elif sent.signal is not None and sent.signal.state == "rejected":
        # One line per wrong field of the payload: not folded by the terminal's width.
        click.echo(f"{key}: signal {name!r} was rejected: {sent.signal.rejected}", err=True)
        sys.exit(int(Exit.REFUSED))
    elif sent.signal is not None and sent.signal.state == "delivered":
        console.print(f"{what} delivered (to step {sent.signal.delivered_to})")
    elif sent.awaited and wait > 0:
        console.print(
            f"{what} sent; not received within {wait:g}s (is a worker running?): "
            f"`sagaway show {escape(key)}` says when it is delivered or rejected",
            soft_wrap=True,
        )
    elif sent.waits_for is not None and sent.waits_for != name:
        console.print(
            f"{what} sent (kept until the workflow receives a signal of that name)",
            soft_wrap=True,
        )
        click.echo(
            f"note: {key} waits for signal {sent.waits_for!r}, not {name!r}: is the name right?",
            err=True,
        )
    else:
        console.print(
            f"{what} sent (its payload is checked when the workflow receives it: "
            f"`sagaway show {escape(key)}` lists it as pending, delivered, or rejected with "
            "the reason)",
            soft_wrap=True,
        )
