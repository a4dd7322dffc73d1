"""The ``sagaway`` command line. Calls the public API only."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import shlex
import signal
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from decimal import Decimal

import click
from rich.console import Console
from rich.table import Table

import sagaway as sw
from sagaway import telemetry
from sagaway._engine import versions
from sagaway.cli import _delivery, _format
from sagaway.cli import _support as support
from sagaway.cli._format import escape
from sagaway.cli._support import (
    EXIT_CODES_HELP,
    Exit,
    codec_key_option,
    mask_url,
    reading_codec,
    reason_option,
    run,
    url_option,
)
from sagaway.cli.audit import audit as audit_command
from sagaway.cli.fork import fork as fork_command
from sagaway.cli.lab import lab as lab_command
from sagaway.cli.lint import lint
from sagaway.cli.listing import list_cmd
from sagaway.cli.purge import purge
from sagaway.cli.replay import replay as replay_command
from sagaway.cli.schedule import schedule_command
from sagaway.cli.server import server as server_command
from sagaway.cli.show import show
from sagaway.cli.start import start
from sagaway.cli.token import token_command
from sagaway.cli.ui import ui as ui_command
from sagaway.store import resolve_url

console = Console()
err_console = Console(stderr=True)


@click.group(
    context_settings={"help_option_names": ["-h", "--help"]},
    invoke_without_command=True,
    epilog=EXIT_CODES_HELP,
)
@click.version_option(sw.__version__, prog_name="sagaway")
@click.pass_context
def cli(ctx: click.Context) -> None:
    """Sagaway: durable sagas for Python.

    Every command takes --db URL (else $SAGAWAY_DATABASE_URL, else sqlite:///sagaway.db).
    list, show and count create nothing: without a Sagaway database they exit 3.
    """
    if ctx.invoked_subcommand is None:
        click.echo(ctx.get_help())
        ctx.exit(0)


# ---------------------------------------------------------------------------- inspection


@cli.command()
@url_option
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def count(url: str | None, as_json: bool) -> None:
    """Count workflows per status."""

    async def go() -> dict[sw.WorkflowStatus, int]:
        async with sw.Manager(url).connect(create=False) as manager:
            return await manager.count_workflows()

    counts = run(go(), url)
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

    async def go() -> tuple[bool, sw.WorkflowStatus]:
        async with sw.Manager(url).connect(create=False) as manager:
            changed = await request(manager)
            return changed, await manager.get_workflow(key).status()

    return run(go(), url)


@cli.command()
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


@cli.command()
@url_option
@click.argument("key")
@click.option(
    "--reason",
    default="cancelled from the command line",
    show_default=True,
    help="Why: the workflow's cancel reason, also kept in the audit trail (sagaway audit).",
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

    async def ended() -> sw.WorkflowStatus:
        async with sw.Manager(url).connect(create=False) as manager:
            handle = manager.get_workflow(key)
            with contextlib.suppress(Exception):
                await handle.result()
            return await handle.status()

    final = run(ended(), url)
    if final is not sw.WorkflowStatus.CANCELLED:
        _refused(f"{key} ended {final.value} (cancellation is cooperative)")
    console.print(f"{escape(key)}: CANCELLED")


@cli.command()
@url_option
@click.argument("key")
@click.option(
    "--reason",
    default="terminated from the command line",
    show_default=True,
    help="Why: recorded as its error, and in the audit trail (sagaway audit).",
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


@cli.command("signal")
@url_option
@click.argument("key")
@click.argument("name")
@click.argument("payload", default="null")
@click.option("--dedupe-id", help="Deliver at most once per workflow for this id.")
@reason_option
@click.option(
    "--wait-delivery",
    "wait",
    type=click.FloatRange(min=0),
    default=2.0,
    show_default=True,
    metavar="SECONDS",
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

    async def go() -> _delivery.Sent:
        async with sw.Manager(url, codec=codec, audit="all").connect(create=False) as manager:
            return await _delivery.send(manager, key, name, data, dedupe_id, wait, reason)

    sent = run(go(), url)
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


# ---------------------------------------------------------------------------- worker


@cli.command()
@url_option
@click.argument("target", metavar="MODULE:MANAGER")
@click.option(
    "--drain",
    default=30.0,
    show_default=True,
    help="Seconds to let running workflows finish on SIGTERM.",
)
@click.option(
    "--concurrency",
    type=click.IntRange(min=1),
    help="Workflows run at once (default: the Manager's).",
)
@click.option(
    "--task-queues",
    help="Comma-separated task queues whose workflows to run (default: all), e.g. billing,default.",
)
@click.option("--queues", hidden=True, help="Old name of --task-queues.")
@click.option(
    "--versions",
    "run_versions",
    metavar="V[,V...]",
    help="Run only executions created by these code versions (Manager(version=...)); "
    "'unversioned' for those without one (default: every version). For blue/green deploys.",
)
@click.option(
    "--metrics-port",
    type=click.IntRange(min=0, max=65535),
    help="Serve Prometheus metrics at http://HOST:PORT/metrics (0: any free port; "
    "needs sagaway[metrics]).",
)
@click.option(
    "--metrics-host",
    default="127.0.0.1",
    show_default=True,
    help="Address the metrics endpoint binds (0.0.0.0: every interface; it has no "
    "authentication, and shows workflow and activity names only).",
)
@click.option(
    "--metrics-refresh",
    type=click.FloatRange(min=0.1),
    default=15.0,
    show_default=True,
    help="Seconds between two counts of the workflows by status (the sagaway_workflows gauge).",
)
@click.option(
    "--log-format",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="json: one JSON object per line, with workflow_key, run_id and step.",
)
@click.option("-v", "--verbose", is_flag=True, help="Log every recovery and state change.")
def worker(
    url: str | None,
    target: str,
    drain: float,
    concurrency: int | None,
    task_queues: str | None,
    queues: str | None,
    run_versions: str | None,
    metrics_port: int | None,
    metrics_host: str,
    metrics_refresh: float,
    log_format: str,
    verbose: bool,
) -> None:
    """Run the workers of an application's Manager until SIGTERM/SIGINT.

    SIGTERM (or Ctrl-C) stops taking work, lets running workflows finish for --drain seconds,
    then releases the rest so other workers take them over at once. A second signal skips the
    wait.
    """
    telemetry.configure_logging(
        logging.INFO if verbose else logging.WARNING, json_lines=log_format == "json"
    )
    manager = support.load_manager(target)
    if url is not None:
        manager.url = resolve_url(url)
    if concurrency is not None:
        manager.concurrency = concurrency
    if queues is not None:
        click.echo("warning: --queues is now --task-queues", err=True)
        if task_queues is not None and task_queues != queues:
            raise click.UsageError("--queues (the old name of --task-queues) disagrees with it")
        task_queues = queues
    if task_queues is not None:
        manager.task_queues = _task_queues(task_queues, manager.registry.task_queues())
    if run_versions is not None:
        try:
            manager.run_versions = versions.parse_versions(run_versions)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--versions") from None
    run(support.check_reachable(manager.url), manager.url)
    if metrics_port is not None:
        _serve_metrics(metrics_port, metrics_host)
    _serve(manager, target, drain, metrics=metrics_refresh if metrics_port is not None else None)


def _serve_metrics(port: int, host: str) -> None:
    try:
        from sagaway.telemetry import metrics
    except ImportError as exc:
        support.fail(str(exc), Exit.USAGE)
    try:
        bound = metrics.serve_metrics(port, host)
    except OSError as exc:
        support.fail(f"cannot serve metrics on {host}:{port}: {exc}", Exit.USAGE)
    shown = f"[{host}]" if ":" in host else host
    err_console.print(f"sagaway worker: metrics on http://{shown}:{bound}/metrics")


def _task_queues(value: str, known: set[str]) -> frozenset[str]:
    """The task queues named by ``--task-queues``, each one some registered workflow uses (a
    worker claims only workflows of its queues, and can run only those it registered)."""
    names = frozenset(q.strip() for q in value.split(",") if q.strip())
    if not names or any(name.startswith("-") for name in names):  # `--task-queues -v`
        raise click.BadParameter(
            f"give at least one task queue name, not {value!r}", param_hint="--task-queues"
        )
    unknown = sorted(names - known)
    if unknown:
        raise click.BadParameter(
            f"no registered workflow uses task queue {', '.join(map(repr, unknown))}; "
            f"the application's task queues are {', '.join(sorted(known)) or 'none'} "
            "(register_workflow(task_queue=...))",
            param_hint="--task-queues",
        )
    return names


def _version_note(manager: sw.Manager) -> str:
    """The banner's words on code versions: what this process creates, what it runs."""
    note = f"; code version {manager.version}" if manager.version is not None else ""
    if manager.run_versions is not None:
        shown = sorted(versions.label(v) for v in manager.run_versions)
        note += f"; runs versions {','.join(shown)}"
    return note


def _serve(manager: sw.Manager, target: str, drain: float, *, metrics: float | None = None) -> None:
    """``metrics``: refresh the status gauge this often (None: metrics are off)."""

    async def go() -> None:
        stop, force = asyncio.Event(), asyncio.Event()
        loop = asyncio.get_running_loop()

        def on_signal() -> None:
            if stop.is_set():
                force.set()
            else:
                stop.set()
                err_console.print(
                    f"sagaway worker: draining for up to {drain:g}s (again to stop now)"
                )

        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, on_signal)
        console.print(
            f"sagaway worker: {escape(target)} on {escape(mask_url(manager.url))} "
            f"({len(manager.registry.names())} functions registered"
            f"{escape(_version_note(manager))})",
            soft_wrap=True,
        )
        poller = None
        if metrics is not None:
            from sagaway.telemetry.metrics import StatusPoller

            poller = StatusPoller(manager, metrics)
            poller.start()
        try:
            await manager.serve(stop, drain_timeout=drain, force=force)
        finally:
            if poller is not None:
                await poller.stop()
        console.print("sagaway worker: stopped")

    run(go(), manager.url)


# ---------------------------------------------------------------------------- demo


@cli.group(invoke_without_command=True)
@url_option
@click.pass_context
def demo(ctx: click.Context, url: str | None) -> None:
    """Run the crypto purchase saga twice: once to completion, once compensated.

    `sagaway demo lab` runs the order lab (five saga design experiments) instead.
    """
    if ctx.invoked_subcommand is not None:
        return
    from sagaway.demo import crypto_purchase as cp

    async def go() -> None:
        services = cp.Services()
        manager = sw.Manager(url)
        workflow = cp.build(manager, services)
        await support.check_reachable(manager.url)
        run = uuid.uuid4().hex[:6]
        console.print(
            f"[bold]Sagaway demo[/bold]: crypto purchase saga on {escape(mask_url(manager.url))}\n",
            soft_wrap=True,
        )
        async with manager:
            for label, market_open in (("completes", True), ("coin credit fails", False)):
                services.market_open = market_open
                purchase = cp.Purchase(
                    f"trade-{run}-{int(not market_open) + 1}",
                    "alice",
                    Decimal("1500000") / 100,
                    300,
                    Decimal("0.001"),
                )
                key = purchase.trade_id
                console.print(
                    f"[bold]{key}[/bold] ({label}): buy {purchase.btc} BTC "
                    f"for ¥{purchase.yen} + {purchase.points} points"
                )
                started = time.perf_counter()
                try:
                    receipt = await manager.workflow(workflow, purchase).execute_get(
                        idempotency_key=key
                    )
                    outcome = f"[green]COMPLETED[/green] {receipt}"
                except cp.CoinUnavailable as exc:
                    outcome = f"[red]FAILED[/red] {type(exc).__name__}: {exc}"
                elapsed = (time.perf_counter() - started) * 1000
                d = await manager.get_workflow(key).describe()
                t0 = d.created_at
                for s in d.steps:
                    end = s.ended_at if s.ended_at is not None else s.started_at
                    arrow = "↩ compensate" if s.kind is sw.StepKind.COMPENSATION else "→ step      "
                    note = f"  {s.error['message']}" if s.error else ""
                    console.print(
                        f"  +{(end - t0) * 1000:7.1f} ms  {arrow} {s.name:<18} "
                        f"{_format.styled(s.status.value)}{note}"
                    )
                console.print(f"  = {outcome}  ({elapsed:.1f} ms)")
                console.print(
                    f"  balances: ¥{services.yen}  points {services.points}  BTC {services.btc}\n"
                )
        db = f" --db {shlex.quote(mask_url(manager.url))}" if url is not None else ""
        click.echo(f"Inspect them: sagaway show{db} trade-{run}-2 ; sagaway list{db}")

    run(go(), url)


cli.add_command(audit_command)
cli.add_command(lint)
cli.add_command(fork_command)
cli.add_command(replay_command)
cli.add_command(purge)
cli.add_command(schedule_command)
cli.add_command(list_cmd)
cli.add_command(show)
cli.add_command(start)
cli.add_command(server_command)
cli.add_command(ui_command)
cli.add_command(token_command)
demo.add_command(lab_command)


def main() -> None:
    cli(prog_name="sagaway")


if __name__ == "__main__":
    main()
