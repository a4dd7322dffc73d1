"""What ``SyncClient.start`` runs on its loop thread: a start by function or by name, with the
options of ``execute()`` (``sync.py`` hands it over; it blocks for the outcome); and what the
sync client uses of a Manager (``ClientManager``, re-exported by ``sync``)."""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Callable, Coroutine
from typing import Any, Protocol, Unpack, cast

from sagaway._engine.start_options import PLACING, NamedStart, StartPlacing
from sagaway.batches import BatchAction, BatchOptions, BatchReport, WorkflowFilter
from sagaway.registry import Registry
from sagaway.signals import Signal
from sagaway.states import OnConflict
from sagaway.workflow import WorkflowCall, WorkflowHandle


class ClientManager(Protocol):
    """What the sync client uses of a Manager (``sagaway.Manager`` is one)."""

    url: str
    registry: Registry

    def connect(self, *, create: bool = True) -> contextlib.AbstractAsyncContextManager[Any]: ...

    def client_copy(self) -> ClientManager: ...

    def workflow(self, fn: Any, /, *args: Any, **kwargs: Any) -> WorkflowCall[Any]: ...

    async def start_by_name(
        self, name: str, kwargs: dict[str, Any] | None = None, **options: Unpack[NamedStart]
    ) -> WorkflowHandle[Any]: ...

    def get_workflow(self, key: str) -> WorkflowHandle[Any]: ...

    def signal(self, name: str) -> Signal: ...

    async def cancel(self, key: str, reason: str = ...) -> bool: ...

    async def terminate(self, key: str, reason: str = ...) -> bool: ...

    async def batch(
        self, action: BatchAction | str, filter: WorkflowFilter, **options: Unpack[BatchOptions]
    ) -> BatchReport: ...


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
) -> WorkflowHandle[Any]:
    """A registered function or name as ``execute()`` starts it; a name known here by name
    only as ``start_by_name`` does (arguments by parameter name only). ``kwargs``: the
    workflow's keyword arguments and the start's ``StartPlacing`` options, told apart by
    ``own_arguments``."""
    kwargs, options = own_arguments(manager, workflow, kwargs)
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
) -> tuple[dict[str, Any], StartPlacing]:
    """The workflow's keyword arguments and the start's options (``StartPlacing``) among
    ``kwargs``. These options came after ``start(fn, **kwargs)`` passed every other keyword to
    the workflow: a name a registered workflow declares as a parameter of its own
    (``priority`` of an order, say) stays its argument, as before. A workflow known here by
    name only has no parameters to look at: there the names are the start's options (a
    workflow parameter of the same name is given through ``Manager.start_by_name``'s
    arguments dictionary; docs/sync-client.md). An option given as None is not given."""
    given = {n: v for n, v in kwargs.items() if n in PLACING and v is not None}
    kwargs = {n: v for n, v in kwargs.items() if n not in PLACING}
    if given and (not isinstance(workflow, str) or workflow in manager.registry.names()):
        declared = inspect.signature(manager.registry.workflow(workflow).fn).parameters
        kwargs |= {n: v for n, v in given.items() if n in declared}
        given = {n: v for n, v in given.items() if n not in declared}
    return kwargs, cast(StartPlacing, given)
