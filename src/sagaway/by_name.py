"""Starts of a workflow known by name only (``Manager.start_by_name``, ``sagaway start``
without ``--app``, ``SyncClient.start("name", ...)``): the process that starts it need not
have registered it; a worker that did runs it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from sagaway import errors, serialization
from sagaway._engine import flow
from sagaway._engine.options import check_deadline
from sagaway._engine.start_options import NamedStart, StartPlacing, split_placing
from sagaway.registry import WorkflowDef
from sagaway.states import OnConflict
from sagaway.workflow import ClientStart, WorkflowCall, WorkflowHandle, start_outside

if TYPE_CHECKING:
    from sagaway._engine.engine import EngineRef


_NAMED_ONLY = NamedStart.__optional_keys__ - StartPlacing.__optional_keys__
"""``start_by_name``'s own options (the others: ``StartPlacing``'s)."""


def _unregistered(**kwargs: Any) -> Any:
    """Stands for a workflow this process knows by name only (never called)."""
    raise errors.NotRegistered("a workflow started by name runs in a process that registered it")


async def start_by_name(
    engines: EngineRef,
    name: str,
    kwargs: dict[str, Any],
    options: NamedStart,
    deadline: float | None,
) -> WorkflowHandle[Any]:
    """Start the workflow registered as ``name`` in some other process (a worker), with its
    arguments by parameter name as plain JSON values. A name this process registered is
    started as ``WorkflowCall`` would, its arguments encoded by the function's annotations.
    ``options``: as ``Manager.start_by_name`` takes them, all checked before anything is
    stored; ``deadline``: theirs, under its current name."""
    engine = engines.require()
    on_conflict = options.get("on_conflict", OnConflict.ATTACH)
    if not isinstance(on_conflict, OnConflict):
        raise TypeError("on_conflict must be a sagaway.OnConflict")
    check_deadline(deadline)
    placing = {n: v for n, v in options.items() if n not in _NAMED_ONLY}
    keyed, asked = split_placing(cast(StartPlacing, placing), "start_by_name()")
    key, reason = options.get("idempotency_key"), options.get("reason")
    task_queue = options.get("task_queue", "default")
    if name in engine.registry.names():
        defn = engine.registry.workflow(name)
        registered = flow.registered(flow.PLAIN, defn.priority)
        start = ClientStart(
            key, on_conflict, deadline, reason, keyed, flow.of_start(*asked, inherited=registered)
        )
        return await WorkflowCall[Any](engines, name, (), kwargs)._start(defn, start)
    start = ClientStart(key, on_conflict, deadline, reason, keyed, flow.of_start(*asked))
    if not isinstance(name, str) or not name:
        raise ValueError("a workflow name is a non-empty string")
    if not isinstance(task_queue, str) or not task_queue:
        raise ValueError("a workflow's task_queue is a non-empty string")
    args_json = serialization.encode_value(
        kwargs, f"arguments of workflow {name!r}", engine.payload_limit
    )
    defn = WorkflowDef(
        name=name,
        fn=_unregistered,
        codec=serialization.FunctionCodec(_unregistered, f"workflow {name!r}"),
        task_queue=task_queue,
    )
    return await start_outside(engines, defn, args_json, start)
