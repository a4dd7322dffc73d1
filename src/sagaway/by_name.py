"""Starts of a workflow known by name only (``Manager.start_by_name``, ``sagaway start``
without ``--app``, ``SyncClient.start("name", ...)``): the process that starts it need not
have registered it; a worker that did runs it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sagaway import errors, serialization
from sagaway._engine import flow
from sagaway._engine.flow_control import StartPlacing, split_placing
from sagaway._engine.options import check_deadline
from sagaway.registry import WorkflowDef
from sagaway.states import OnConflict
from sagaway.workflow import ClientStart, WorkflowCall, WorkflowHandle, start_outside

if TYPE_CHECKING:
    from sagaway._engine.engine import EngineRef


def _unregistered(**kwargs: Any) -> Any:
    """Stands for a workflow this process knows by name only (never called)."""
    raise errors.NotRegistered("a workflow started by name runs in a process that registered it")


async def start_by_name(
    engines: EngineRef,
    name: str,
    kwargs: dict[str, Any],
    *,
    key: str | None,
    task_queue: str,
    on_conflict: OnConflict,
    deadline: float | None,
    reason: str | None = None,
    placing: StartPlacing | None = None,
) -> WorkflowHandle[Any]:
    """Start the workflow registered as ``name`` in some other process (a worker), with its
    arguments by parameter name as plain JSON values. A name this process registered is
    started as ``WorkflowCall`` would, its arguments encoded by the function's annotations.
    ``placing``: its order, debounce, priority and fairness (as ``execute()`` takes them;
    checked before anything is stored)."""
    engine = engines.require()
    if not isinstance(on_conflict, OnConflict):
        raise TypeError("on_conflict must be a sagaway.OnConflict")
    check_deadline(deadline)
    keyed, asked = split_placing(placing or {}, "start_by_name()")
    start = ClientStart(key, on_conflict, deadline, reason, keyed, flow.of_start(*asked))
    if name in engine.registry.names():
        return await WorkflowCall[Any](engines, name, (), kwargs)._start(start)
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
