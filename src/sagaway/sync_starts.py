"""What ``SyncClient.start`` runs on its loop thread: a start by function or by name, with the
options of ``execute()`` (``sync.py`` hands it over; it blocks for the outcome)."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

from sagaway.states import OnConflict
from sagaway.workflow import WorkflowHandle

if TYPE_CHECKING:
    from sagaway.sync import ClientManager


async def start(
    manager: ClientManager,
    workflow: Callable[..., Coroutine[Any, Any, Any]] | str,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    *,
    key: str | None,
    on_conflict: OnConflict,
    deadline: float | None,
    task_queue: str,
    ordering_key: str | None,
    debounce_key: str | None,
    debounce: float | None,
    debounce_max_wait: float | None,
    priority: int | None,
    fairness_key: str | None,
    fairness_weight: float | None,
) -> WorkflowHandle[Any]:
    """A registered function or name as ``execute()`` starts it; a name known here by name
    only as ``start_by_name`` does (arguments by parameter name only)."""
    options: dict[str, Any] = {
        "ordering_key": ordering_key,
        "debounce_key": debounce_key,
        "debounce": debounce,
        "debounce_max_wait": debounce_max_wait,
        "priority": priority,
        "fairness_key": fairness_key,
        "fairness_weight": fairness_weight,
    }
    kwargs, options = own_arguments(manager, workflow, kwargs, options)
    if isinstance(workflow, str) and workflow not in manager.registry.names():
        if args:
            raise TypeError(
                f"workflow {workflow!r} is known here by name only: pass its arguments "
                "by parameter name (keyword arguments)"
            )
        return await manager.start_by_name(
            workflow,
            kwargs,
            idempotency_key=key,
            task_queue=task_queue,
            on_conflict=on_conflict,
            deadline=deadline,
            **options,
        )
    return await manager.workflow(workflow, *args, **kwargs).execute(
        idempotency_key=key,
        on_conflict=on_conflict,
        deadline=deadline,
        **options,
    )


def own_arguments(
    manager: ClientManager,
    workflow: Callable[..., Coroutine[Any, Any, Any]] | str,
    kwargs: dict[str, Any],
    options: dict[str, Any],
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The workflow's keyword arguments and the start's options. These options came after
    ``start(fn, **kwargs)`` passed every other keyword to the workflow: a name a registered
    workflow declares as a parameter of its own (``priority`` of an order, say) stays its
    argument, as before. A workflow known here by name only has no parameters to look at:
    there the names are the start's options (a workflow parameter of the same name is given
    through ``Manager.start_by_name``'s arguments dictionary; docs/sync-client.md)."""
    given = {name: value for name, value in options.items() if value is not None}
    if not given or (isinstance(workflow, str) and workflow not in manager.registry.names()):
        return kwargs, given
    declared = inspect.signature(manager.registry.workflow(workflow).fn).parameters
    theirs = {n: v for n, v in given.items() if n in declared}
    return {**kwargs, **theirs}, {n: v for n, v in given.items() if n not in theirs}
