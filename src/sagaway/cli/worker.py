"""``sagaway worker``: run an application's workers until SIGTERM/SIGINT, draining first."""

from __future__ import annotations

import asyncio
import logging
import signal

import click
from rich.console import Console

import sagaway as sw
from sagaway import telemetry
from sagaway._engine import versions
from sagaway.cli import _support as support
from sagaway.cli._format import escape
from sagaway.cli._options import number_option, old_name_option
from sagaway.cli._support import Exit, mask_url, run, url_option
from sagaway.store import resolve_url

console = Console()
err_console = Console(stderr=True)


@click.command()
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
@old_name_option("--queues", "--task-queues")
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
@number_option(
    "--metrics-refresh",
    default=15.0,
    minimum=0.1,
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
