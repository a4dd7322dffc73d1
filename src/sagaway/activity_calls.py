"""The durable calls behind ``manager.activity()`` and the wrappers ``register_activity``
returns (``sagaway.workflow`` re-exports them; workflow starts live there)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from sagaway import errors
from sagaway._engine import context, flow
from sagaway._engine.executor import current_execution
from sagaway.registry import ActivityDef
from sagaway.retry import RetryPolicy

if TYPE_CHECKING:
    from sagaway._engine.engine import EngineRef

R = TypeVar("R")


class PendingCall(Generic[R]):
    """A durable call not made yet: the registered function (or its name) and its arguments,
    held until one of the subclass's execute methods makes it."""

    def __init__(
        self,
        engines: EngineRef,
        fn: Callable[..., Any] | str,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> None:
        self._engines = engines
        self._fn = fn
        self._args = args
        self._kwargs = kwargs


class ActivityCall(PendingCall[R]):
    """``manager.activity(fn, *args, **kwargs)``: a durable call, made with an execute method."""

    async def execute_get(
        self,
        *,
        retry: RetryPolicy | None = None,
        timeout: float | None = None,
        priority: int | None = None,
    ) -> R:
        """Run the activity durably and return its result (replayed if already recorded).

        ``priority`` (1 lowest .. 5 highest): this call's place while its queue is saturated,
        higher first, equal ones first in, first out (default: ``register_activity
        (priority=)``, else the workflow's priority; docs/limits.md)."""
        execution = current_execution()
        if execution is None:
            raise errors.SagawayError(
                "activities run durably inside a workflow: call manager.activity(...) from a "
                "function registered with @manager.register_workflow (outside a workflow, call "
                "the function directly)"
            )
        defn = execution.engine.registry.activity(self._fn)
        if timeout is not None and timeout <= 0:
            raise ValueError("activity timeout must be > 0 seconds")
        flow.check_level(priority, "an activity's priority")
        call_id, seq = context.next_call_id()
        result: R = await execution.call_activity(
            defn,
            self._args,
            self._kwargs,
            call_id,
            seq,
            policy=retry or defn.retry,
            timeout=timeout if timeout is not None else defn.timeout,
            priority=priority,
        )
        return result

    async def execute_wait(
        self,
        *,
        retry: RetryPolicy | None = None,
        timeout: float | None = None,
        priority: int | None = None,
    ) -> None:
        """Run the activity durably; its result is discarded."""
        await self.execute_get(retry=retry, timeout=timeout, priority=priority)


def activity_wrapper(engines: EngineRef, defn: ActivityDef) -> Callable[..., Any]:
    """What ``register_activity`` returns: inside a workflow, a call of it is a durable call
    (``ActivityCall.execute_get``); elsewhere (tests, other activities) it runs the function."""
    func = defn.fn
    if defn.is_async:

        @functools.wraps(func)
        async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
            if current_execution() is not None:
                return await ActivityCall[Any](engines, defn.name, args, kwargs).execute_get()
            return await func(*args, **kwargs)

        return async_wrapper

    @functools.wraps(func)
    def sync_wrapper(*args: Any, **kwargs: Any) -> Any:
        if current_execution() is not None:
            return ActivityCall[Any](engines, defn.name, args, kwargs).execute_get()
        return func(*args, **kwargs)

    return sync_wrapper
