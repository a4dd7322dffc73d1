"""``sagaway start``: start a workflow by name, with or without the application's code.

Without ``--app`` the workflow is started by name, its arguments stored by parameter name as the
JSON given: the worker that registered it types them when it runs it. With ``--app`` the name
and the arguments are checked against the registered function first, and typed by its
annotations (a dataclass argument is built from its JSON object). ``--wait`` prints the stored
result as JSON, which needs no application code either.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Awaitable, Callable
from typing import Any

import click
from rich.console import Console
from rich.markup import escape

import sagaway as sw
from sagaway.cli import _start_flow
from sagaway.cli import _support as support
from sagaway.cli._ending import result_or_error
from sagaway.cli._options import old_name_option
from sagaway.cli._support import Exit, fail, reading_codec, reason_option, run, url_option
from sagaway.registry import Registry
from sagaway.store import resolve_url

console = Console()


def _call_args(text: str) -> tuple[list[Any], dict[str, Any]]:
    value = support.json_arg(text, "JSON_ARGS", '\'{"order_id": "o-1"}\' or \'["o-1", 2]\'')
    if isinstance(value, dict):
        return [], value
    if isinstance(value, list):
        return value, {}
    raise click.BadParameter(
        "JSON_ARGS must be a JSON object (keyword arguments) or array (positional ones)"
    )


_AFTER_START = click.FloatRange(min=0, min_open=True)
"""Seconds after the start (more than zero)."""


@click.command()
@url_option
@click.argument("name")
@click.argument("json_args", metavar="[JSON_ARGS]", default="[]")
@click.option("--key", required=True, help="The workflow's idempotency key.")
@click.option(
    "--app",
    "target",
    default=None,
    metavar="MODULE:MANAGER",
    help="The application's Manager, e.g. myapp.workflows:manager: NAME and JSON_ARGS are "
    "checked against the registered function and typed by its annotations. Without it the "
    "arguments are stored by name as given, for the worker that registered NAME.",
)
@click.option(
    "--task-queue",
    default=None,
    metavar="QUEUE",
    help="Without --app: the task queue of workers that run NAME (default: default). With "
    "--app, the registered one is used.",
)
@click.option(
    "--deadline",
    type=_AFTER_START,
    metavar="SECONDS",
    help="The workflow's deadline, in seconds from its start: past it, it is cancelled (and "
    "compensates). It does not bound --wait.",
)
@old_name_option("--timeout", "--deadline", _AFTER_START)
@click.option(
    "--wait", is_flag=True, help="Wait for the end; print the result as JSON, or the error."
)
@_start_flow.flow_options
@reason_option
def start(
    url: str | None,
    name: str,
    json_args: str,
    key: str,
    target: str | None,
    task_queue: str | None,
    deadline: float | None,
    timeout: float | None,
    wait: bool,
    reason: str | None,
    **flow_values: Any,
) -> None:
    """Start workflow NAME under KEY (a `sagaway worker` that registered NAME runs it).

    JSON_ARGS is a JSON object of keyword arguments, or (with --app) an array of positional
    ones. A workflow already under KEY is joined, not started again. With --wait: print the
    result as JSON and exit 0 when it completes, 1 when it fails, is cancelled or terminated.
    Exit 2 for arguments the workflow does not take (with --app: checked before anything is
    stored). A start that creates the workflow is recorded in the audit trail (who, when,
    --reason).
    --priority, --fairness-*, --ordering-key, --debounce*: as execute() has them.
    """
    args, kwargs = _call_args(json_args)
    flow_options = _start_flow.checked(flow_values)
    options: dict[str, Any] = {
        "idempotency_key": key,
        "deadline": _deadline(deadline, timeout),
        "reason": reason,
        **flow_options,
    }
    manager, begin = _begin(target, url, name, args, kwargs, task_queue, options)
    run(support.check_reachable(manager.url), manager.url)
    handle, existing = run(_start(manager, key, begin), manager.url)
    console.print(_started(key, name, handle, existing))
    if wait:
        _wait(_reader(manager), handle.key)  # a joined burst's run is under its first key


def _started(
    key: str, name: str, handle: sw.WorkflowHandle[Any], existing: sw.WorkflowStatus | None
) -> str:
    """What the start did: started, joined the execution under KEY, or (--debounce-key)
    joined the open burst of the same workflow and debounce key, under its first key."""
    if handle.key != key:
        return (
            f"{escape(key)}: joined the debounced run under {escape(handle.key)} "
            f"(run {handle.run_id})"
        )
    if existing is None:
        return f"{escape(key)}: {escape(name)} started (run {handle.run_id})"
    return f"{escape(key)}: already exists ({existing.value}, run {handle.run_id})"


def _deadline(deadline: float | None, timeout: float | None) -> float | None:
    """--deadline, or --timeout (its deprecated old name) with a warning."""
    if timeout is None:
        return deadline
    if deadline is not None:
        raise click.BadParameter("give --deadline only (--timeout is its old name)")
    click.echo("warning: --timeout is deprecated: use --deadline (the same seconds)", err=True)
    return timeout


def _typed(
    manager: sw.Manager, name: str, args: list[Any], kwargs: dict[str, Any]
) -> tuple[list[Any], dict[str, Any]]:
    """The arguments checked against the workflow registered as ``name`` and typed by its
    annotations (exit 2 if it is not registered or does not take them)."""
    try:
        defn = manager.registry.workflow(name)
    except sw.NotRegistered as exc:
        fail(str(exc), Exit.USAGE)
    try:
        return defn.codec.type_args(args, kwargs)
    except TypeError as exc:
        fail(f"{exc}; it takes ({_params(defn.codec.signature)})", Exit.USAGE)
    except sw.PayloadError as exc:
        click.echo(f"error: {exc}", err=True)  # one line per wrong field
        raise SystemExit(int(Exit.USAGE)) from None


def _params(signature: inspect.Signature) -> str:
    """The parameters by name, with their defaults: ``order, twice=False``."""
    shown = []
    for p in signature.parameters.values():
        prefix = "*" if p.kind is p.VAR_POSITIONAL else "**" if p.kind is p.VAR_KEYWORD else ""
        default = "" if p.default is p.empty else f"={p.default!r}"
        shown.append(f"{prefix}{p.name}{default}")
    return ", ".join(shown)


Started = tuple[sw.WorkflowHandle[Any], sw.WorkflowStatus | None]
"""The handle, and the status of the workflow already under the key (None: started now)."""


async def _existing(manager: sw.Manager, key: str) -> sw.WorkflowStatus | None:
    try:
        return await manager.get_workflow(key).status()
    except sw.WorkflowNotFound:
        return None


Begin = Callable[[], Awaitable[sw.WorkflowHandle[Any]]]
"""The call that starts (or joins) the workflow."""


def _begin(
    target: str | None,
    url: str | None,
    name: str,
    args: list[Any],
    kwargs: dict[str, Any],
    task_queue: str | None,
    options: dict[str, Any],
) -> tuple[sw.Manager, Begin]:
    """The Manager and the call that starts the workflow: without --app a start by name, its
    arguments stored as given; with it, the registered workflow's, its arguments typed by it."""
    if target is None:
        if args:
            raise click.BadParameter(
                "without --app, give the arguments by name, as a JSON object such as "
                '\'{"order_id": "o-1"}\' (positional ones need the function: pass --app)',
                param_hint="JSON_ARGS",
            )
        # An operator's start: audited, with or without a reason (audit="all").
        manager = sw.Manager(url, codec=reading_codec(None), audit="all")
        queue = task_queue or "default"
        return manager, lambda: manager.start_by_name(name, kwargs, task_queue=queue, **options)
    if task_queue is not None:
        raise click.BadParameter(
            "with --app the workflow's registered task queue is used", param_hint="--task-queue"
        )
    app = support.load_manager(target)
    app.options = dataclasses.replace(app.options, audit="all")
    if url is not None:
        app.url = resolve_url(url)
    typed_args, typed_kwargs = _typed(app, name, args, kwargs)
    return app, lambda: app.workflow(name, *typed_args, **typed_kwargs).execute(**options)


async def _start(manager: sw.Manager, key: str, begin: Begin) -> Started:
    """Start (or join) the workflow with ``begin``, saying what was under its key before."""
    async with manager.connect():
        existing = await _existing(manager, key)
        return await begin(), existing


def _reader(manager: sw.Manager) -> sw.Manager:
    """A Manager on the same database and codecs that registers nothing: it reads a result as
    the plain JSON stored, whatever type the workflow returns."""
    reader = manager.client_copy()
    reader.registry = Registry()
    return reader


def _wait(manager: sw.Manager, key: str) -> None:
    async def go() -> tuple[bool, str]:
        async with manager.connect():
            return await result_or_error(manager.get_workflow(key))

    ok, text = run(go(), manager.url)
    if not ok:
        fail(f"{key} failed: {text}", Exit.REFUSED, manager.url)
    click.echo(text)
