"""The Manager's registration: workflows and activities into its registry, declared schedules.

Registration is allowed while the Manager is closed; the registry is handed to the engine when
the Manager opens, and the declared schedules are written then (``Manager._open``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from sagaway._engine import flow
from sagaway._engine.engine import EngineRef
from sagaway.registry import Queue, Registry, check_queue, task_queue_of
from sagaway.retry import RetryPolicy
from sagaway.schedules import ScheduleSpec, declare
from sagaway.workflow import activity_wrapper

F = TypeVar("F", bound=Callable[..., Any])


class Registration:
    """The registry of a Manager, and the schedules declared with its workflows."""

    def __init__(self, ref: EngineRef) -> None:
        self._ref = ref
        self.registry = Registry()
        self.declared: list[ScheduleSpec] = []
        """Schedules of ``register_workflow(schedule=...)``, written when workers open."""

    def activity(
        self,
        fn: F | None,
        name: str | None,
        retry: RetryPolicy | None,
        timeout: float | None,
        queue: str | None,
        priority: int | None,
        queues: Mapping[str, Queue],
    ) -> F | Callable[[F], F]:
        """``Manager.register_activity`` (its options in order); ``queues`` are the Manager's
        queue limits."""
        check_queue(queue, queues)
        flow.check_level(priority, "an activity's priority")

        def decorate(func: F) -> F:
            defn = self.registry.register_activity(
                func, name=name, retry_policy=retry, timeout=timeout, queue=queue, priority=priority
            )
            wrapper = activity_wrapper(self._ref, defn)
            self.registry.add_alias(defn, wrapper)
            return wrapper  # type: ignore[return-value]

        return decorate(fn) if fn is not None else decorate

    def workflow(
        self,
        fn: F | None,
        name: str | None,
        task_queue: str,
        queue: str | None,
        max_per_key: int,
        priority: int | None,
        schedule: tuple[str | None, str, str, Sequence[Any] | Mapping[str, Any] | None, str | None],
    ) -> F | Callable[[F], F]:
        """``Manager.register_workflow`` (its options in order); ``schedule``: its cron
        expression, time zone, catch-up policy, arguments and id (``declare``)."""
        task_queue = task_queue_of(task_queue, queue)
        flow.check_level(priority, "a registered workflow's priority")

        def decorate(func: F) -> F:
            spec = declare(func, name, *schedule)
            self.registry.register_workflow(
                func, name=name, task_queue=task_queue, max_per_key=max_per_key, priority=priority
            )
            if spec is not None:
                self.declared.append(spec)
            return func

        return decorate(fn) if fn is not None else decorate
