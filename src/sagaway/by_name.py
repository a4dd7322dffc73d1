"""Starts of a workflow known by name only (``Manager.start_by_name``, ``sagaway start``
without ``--app``, ``SyncClient.start("name", ...)``): the process that starts it need not
have registered it; a worker that did runs it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sagaway import errors, serialization
from sagaway._engine import flow
from sagaway._engine.flow_control import FlowOptions
from sagaway._engine.options import check_deadline
from sagaway.randomness import new_id
from sagaway.registry import WorkflowDef
from sagaway.states import OnConflict
from sagaway.workflow import WorkflowCall, WorkflowHandle, start_note

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
    keyed: FlowOptions | None = None,
    asked: tuple[int | None, str | None, float | None] = (None, None, None),
) -> WorkflowHandle[Any]:
    """Start the workflow registered as ``name`` in some other process (a worker), with its
    arguments by parameter name as plain JSON values. A name this process registered is
    started as ``WorkflowCall`` would, its arguments encoded by the function's annotations.
    ``keyed``: its per-key order and debounce; ``asked``: its priority, fairness key and
    weight (as ``execute()`` takes them; checked before anything is stored)."""
    engine = engines.require()
    if not isinstance(on_conflict, OnConflict):
        raise TypeError("on_conflict must be a sagaway.OnConflict")
    check_deadline(deadline)
    keyed = keyed if keyed is not None else FlowOptions()
    if name in engine.registry.names():
        registered = flow.registered(flow.PLAIN, engine.registry.workflow(name).priority)
        start_flow = flow.of_start(*asked, inherited=registered)
        call = WorkflowCall[Any](engines, name, (), kwargs)
        return await call._start(key, on_conflict, deadline, None, reason, keyed, start_flow)
    start_flow = flow.of_start(*asked)
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
    key = key if key is not None else new_id()
    record, _ = await engine.start(
        defn,
        args_json,
        key=key,
        on_conflict=on_conflict,
        deadline=deadline,
        client=True,
        audit_note=start_note(engine.options.audit, reason, on_conflict),
        flow=start_flow,
        keyed=keyed,
    )
    return WorkflowHandle(engines, record.key, record.run_id)  # a joined burst: its key
