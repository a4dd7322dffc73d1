"""The ``sagaway`` command line. Calls the public API only."""

from __future__ import annotations

import asyncio
import datetime
import importlib
import json
import logging
import signal
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from decimal import Decimal
from typing import Any, TypeVar

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

import sagaway as sw
from sagaway.cli.lab import lab as lab_command
from sagaway.cli.lint import lint
from sagaway.store import resolve_url

T = TypeVar("T")
console = Console()
err_console = Console(stderr=True)

_STATUS_STYLE = {
    "COMPLETED": "green",
    "FAILED": "red",
    "SUSPENDED": "yellow",
    "RUNNING": "cyan",
    "PENDING": "cyan",
    "WAITING": "blue",
    "CANCELLED": "magenta",
    "TERMINATED": "magenta",
    "RETRYING": "yellow",
    "ERROR": "red",
}


def _run(coro: Awaitable[T]) -> T:
    try:
        return asyncio.run(coro)  # type: ignore[arg-type]
    except sw.SagawayError as exc:
        err_console.print(f"[red]error:[/red] {exc}")
        sys.exit(1)


def _ts(value: float | None) -> str:
    if value is None:
        return "-"
    return datetime.datetime.fromtimestamp(value).isoformat(sep=" ", timespec="milliseconds")


def _styled(status: str) -> str:
    style = _STATUS_STYLE.get(status, "")
    return f"[{style}]{status}[/{style}]" if style else status


def _url_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    return click.option(
        "--db",
        "url",
        envvar="SAGAWAY_DATABASE_URL",
        default=None,
        help="Database URL (default: $SAGAWAY_DATABASE_URL or sqlite:///sagaway.db).",
    )(fn)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(sw.__version__, prog_name="sagaway")
def cli() -> None:
    """Sagaway: durable sagas for Python."""


# ---------------------------------------------------------------------------- inspection


@cli.command("list")
@_url_option
@click.option(
    "--status", type=click.Choice([s.value for s in sw.WorkflowStatus], case_sensitive=False)
)
@click.option("--limit", default=50, show_default=True, help="At most this many, newest first.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON lines instead of a table.")
def list_cmd(url: str | None, status: str | None, limit: int, as_json: bool) -> None:
    """List workflows, newest first."""

    async def go() -> list[sw.WorkflowDescription]:
        async with sw.Manager(url).connect() as manager:
            wanted = sw.WorkflowStatus(status.upper()) if status else None
            return await manager.list_workflows(status=wanted, limit=limit)

    rows = _run(go())
    if as_json:
        for row in rows:
            click.echo(json.dumps(_summary_json(row)))
        return
    table = Table(title=f"workflows in {resolve_url(url)}")
    for column in ("key", "workflow", "status", "created", "updated"):
        table.add_column(column)
    for row in rows:
        table.add_row(
            escape(row.key),
            escape(row.name),
            _styled(row.status.value),
            _ts(row.created_at),
            _ts(row.updated_at),
        )
    console.print(table)
    if not rows:
        console.print("no workflows")


def _summary_json(d: sw.WorkflowDescription) -> dict[str, Any]:
    return {
        "key": d.key,
        "run_id": d.run_id,
        "workflow": d.name,
        "status": d.status.value,
        "parent_key": d.parent_key,
        "created_at": d.created_at,
        "updated_at": d.updated_at,
        "ended_at": d.ended_at,
        "error": d.error,
        "result": d.result,
        "children": d.children,
        "waiting_for": d.waiting_for,
        "problems": d.problems,
    }


@cli.command()
@_url_option
@click.argument("key")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("--traceback", "show_tb", is_flag=True, help="Show recorded tracebacks.")
def show(url: str | None, key: str, as_json: bool, show_tb: bool) -> None:
    """Show one workflow: status, result or error, and every step with attempts."""

    async def go() -> sw.WorkflowDescription:
        async with sw.Manager(url).connect() as manager:
            return await manager.get_workflow(key).describe()

    d = _run(go())
    if as_json:
        data = _summary_json(d)
        data["steps"] = [
            {
                "call_id": s.call_id,
                "kind": s.kind.value,
                "name": s.name,
                "status": s.status.value,
                "attempts": s.attempts,
                "error": s.error,
                "started_at": s.started_at,
                "ended_at": s.ended_at,
            }
            for s in d.steps
        ]
        click.echo(json.dumps(data, indent=2))
        return
    console.print(f"[bold]{escape(d.key)}[/bold]  workflow {escape(d.name)}  run {d.run_id}")
    console.print(f"status   {_styled(d.status.value)}")
    console.print(
        f"created  {_ts(d.created_at)}   updated {_ts(d.updated_at)}   ended {_ts(d.ended_at)}"
    )
    if d.parent_key:
        console.print(f"parent   {d.parent_key}")
    if d.children:
        console.print(f"children {', '.join(d.children)}")
    if d.waiting_for:
        until = f" (until {_ts(d.next_run_at)})" if d.next_run_at else ""
        console.print(f"waiting  for {d.waiting_for}{until}")
    if d.owner:
        console.print(f"owner    {d.owner}")
    if d.status is sw.WorkflowStatus.SUSPENDED:
        console.print(
            f"retry at {_ts(d.next_run_at)} (suspended {d.suspend_count}x; "
            f"`sagaway retry {d.key}` to retry now)"
        )
    for problem in d.problems:
        console.print(f"[red]unreadable[/red] {escape(problem)}", highlight=False)
    if d.result is not None:
        console.print(f"result   {json.dumps(d.result)}")
    if d.error:
        kind, message = escape(str(d.error.get("type"))), escape(str(d.error.get("message")))
        console.print(f"error    [red]{kind}[/red]: {message}")
        if show_tb and d.error.get("traceback"):
            console.print(d.error["traceback"], markup=False, highlight=False)
    table = Table(title="steps")
    for column in ("#", "kind", "name", "status", "attempts", "duration", "last error"):
        table.add_column(column)
    for s in d.steps:
        duration = (
            "-"
            if s.duration is None or s.kind is sw.StepKind.SLEEP
            else f"{s.duration * 1000:.1f} ms"
        )
        error = escape(f"{s.error.get('type')}: {s.error.get('message')}") if s.error else ""
        table.add_row(
            s.call_id,
            s.kind.value,
            escape(s.name),
            _styled(s.status.value),
            str(s.attempts),
            duration,
            error,
        )
    console.print(table)


@cli.command()
@_url_option
@click.argument("key")
def retry(url: str | None, key: str) -> None:
    """Make a SUSPENDED workflow due now (a running worker picks it up)."""

    async def go() -> tuple[bool, sw.WorkflowStatus]:
        async with sw.Manager(url).connect() as manager:
            changed = await manager.retry(key)
            return changed, await manager.get_workflow(key).status()

    changed, status = _run(go())
    if changed:
        console.print(f"{key}: will be retried by the next worker scan")
    else:
        err_console.print(f"{key} is {status.value}, not SUSPENDED: nothing to retry")
        sys.exit(1)


@cli.command()
@_url_option
@click.argument("key")
@click.option("--reason", default="cancelled from the command line", show_default=True)
def cancel(url: str | None, key: str, reason: str) -> None:
    """Cancel a live workflow (no compensations run)."""

    async def go() -> tuple[bool, sw.WorkflowStatus]:
        async with sw.Manager(url).connect() as manager:
            changed = await manager.get_workflow(key).cancel(reason)
            return changed, await manager.get_workflow(key).status()

    changed, status = _run(go())
    if changed:
        console.print(f"{key}: CANCELLED")
    else:
        err_console.print(f"{key} had already ended ({status.value})")
        sys.exit(1)


@cli.command("signal")
@_url_option
@click.argument("key")
@click.argument("name")
@click.argument("payload", default="null")
@click.option("--dedupe-id", help="Deliver at most once per workflow for this id.")
def signal_cmd(url: str | None, key: str, name: str, payload: str, dedupe_id: str | None) -> None:
    """Send signal NAME with a JSON PAYLOAD to the workflow KEY."""
    try:
        data = json.loads(payload)
    except json.JSONDecodeError as exc:
        raise click.BadParameter(f"PAYLOAD must be JSON ({exc}); e.g. '{{\"ok\": true}}'") from exc

    async def go() -> bool:
        async with sw.Manager(url).connect() as manager:
            return await manager.signal(name).send(key, data, dedupe_id=dedupe_id)

    if _run(go()):
        console.print(f"{key}: signal {name!r} sent")
    else:
        console.print(f"{key}: signal {name!r} with dedupe id {dedupe_id!r} was already sent")


# ---------------------------------------------------------------------------- worker


def _load_manager(target: str) -> sw.Manager:
    module_name, _, attr = target.partition(":")
    if not module_name or not attr:
        raise click.BadParameter("expected MODULE:ATTRIBUTE, e.g. myapp.workflows:manager")
    sys.path.insert(0, ".")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise click.BadParameter(f"cannot import {module_name!r}: {exc}") from exc
    manager = getattr(module, attr, None)
    if not isinstance(manager, sw.Manager):
        raise click.BadParameter(f"{target} is {type(manager).__name__}, not a sagaway.Manager")
    return manager


@cli.command()
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
@click.option("-v", "--verbose", is_flag=True, help="Log every recovery and state change.")
def worker(
    target: str,
    drain: float,
    concurrency: int | None,
    task_queues: str | None,
    queues: str | None,
    verbose: bool,
) -> None:
    """Run the workers of an application's Manager until SIGTERM/SIGINT.

    SIGTERM (or Ctrl-C) stops taking work, lets running workflows finish for --drain seconds,
    then releases the rest so other workers take them over at once. A second signal skips the
    wait.
    """
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    manager = _load_manager(target)
    if concurrency is not None:
        manager.concurrency = concurrency
    if queues is not None:
        click.echo("warning: --queues is now --task-queues", err=True)
        if task_queues is not None and task_queues != queues:
            raise click.UsageError("--queues (the old name of --task-queues) disagrees with it")
        task_queues = queues
    if task_queues is not None:
        names = frozenset(q.strip() for q in task_queues.split(",") if q.strip())
        if not names:
            raise click.BadParameter("give at least one task queue", param_hint="--task-queues")
        manager.task_queues = names

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
            f"sagaway worker: {target} on {manager.url} "
            f"({len(manager.registry.names())} functions registered)"
        )
        await manager.serve(stop, drain_timeout=drain, force=force)
        console.print("sagaway worker: stopped")

    _run(go())


# ---------------------------------------------------------------------------- demo


@cli.group(invoke_without_command=True)
@_url_option
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
        run = uuid.uuid4().hex[:6]
        console.print(f"[bold]Sagaway demo[/bold]: crypto purchase saga on {manager.url}\n")
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
                        f"{_styled(s.status.value)}{note}"
                    )
                console.print(f"  = {outcome}  ({elapsed:.1f} ms)")
                console.print(
                    f"  balances: ¥{services.yen}  points {services.points}  BTC {services.btc}\n"
                )
        console.print(f"Inspect them: sagaway show trade-{run}-2 ; sagaway list")

    _run(go())


cli.add_command(lint)
demo.add_command(lab_command)


def main() -> None:
    cli(prog_name="sagaway")


if __name__ == "__main__":
    main()
