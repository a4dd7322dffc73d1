"""The Manager's registration: workflows and activities into its registry, declared schedules.

Registration is allowed while the Manager is closed; the registry is handed to the engine when
the Manager opens, and the declared schedules are written then (``Manager._open``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypedDict, TypeVar

from sagaway._engine import flow
from sagaway._engine.engine import EngineRef
from sagaway.registry import Queue, Registry, check_queue, task_queue_of
from sagaway.retry import RetryPolicy
from sagaway.schedules import ScheduleSpec, declare
from sagaway.workflow import activity_wrapper

F = TypeVar("F", bound=Callable[..., Any])


class ActivityRegistration(TypedDict, total=False):
    """``Manager.register_activity``'s options, each None unless given: ``name`` (default:
    the function's qualified name), ``retry`` (a ``RetryPolicy``), ``timeout`` (seconds an
    attempt may take), ``queue`` (one of the Manager's ``queues``: a concurrency and rate
    limit), ``priority`` (1..5: its calls' level in a saturated queue; default: the calling
    workflow's)."""

    name: str | None
    retry: RetryPolicy | None
    timeout: float | None
    queue: str | None
    priority: int | None


class WorkflowRegistration(TypedDict, total=False):
    """``Manager.register_workflow``'s options: ``name`` (default: the function's qualified
    name), ``task_queue`` (default ``"default"``; ``queue``: its old spelling),
    ``max_per_key`` (default 1), ``priority`` (1..5: its starts' level when a start gives none;
    default None: the parent's, else 3), and a declared schedule: ``schedule`` (a cron expression;
    default None: none), ``schedule_timezone`` (default ``"UTC"``), ``catch_up`` (default
    ``"one"``), ``schedule_args``, ``schedule_id``."""

    name: str | None
    task_queue: str
    queue: str | None
    max_per_key: int
    priority: int | None
    schedule: str | None
    schedule_timezone: str
    catch_up: str
    schedule_args: Sequence[Any] | Mapping[str, Any] | None
    schedule_id: str | None


def _known(options: Mapping[str, Any], names: frozenset[str], call: str) -> None:
    unknown = sorted(set(options) - names)
    if unknown:
        raise TypeError(f"{call} got an unexpected keyword argument {unknown[0]!r}")


class Registration:
    """The registry of a Manager, and the schedules declared with its workflows."""

    def __init__(self, ref: EngineRef) -> None:
        self._ref = ref
        self.registry = Registry()
        self.declared: list[ScheduleSpec] = []
        """Schedules of ``register_workflow(schedule=...)``, written when workers open."""

    def activity(
        self, fn: F | None, options: ActivityRegistration, queues: Mapping[str, Queue]
    ) -> F | Callable[[F], F]:
        """``Manager.register_activity``: ``queues`` are the Manager's queue limits."""
        _known(options, ActivityRegistration.__optional_keys__, "register_activity()")
        name, queue = options.get("name"), options.get("queue")
        retry, timeout = options.get("retry"), options.get("timeout")
        priority = options.get("priority")
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

    def workflow(self, fn: F | None, options: WorkflowRegistration) -> F | Callable[[F], F]:
        """``Manager.register_workflow``."""
        _known(options, WorkflowRegistration.__optional_keys__, "register_workflow()")
        name, max_per_key = options.get("name"), options.get("max_per_key", 1)
        priority = options.get("priority")
        flow.check_level(priority, "a registered workflow's priority")
        task_queue = task_queue_of(options.get("task_queue", "default"), options.get("queue"))
        schedule = (
            options.get("schedule"),
            options.get("schedule_timezone", "UTC"),
            options.get("catch_up", "one"),
            options.get("schedule_args"),
            options.get("schedule_id"),
        )

        def decorate(func: F) -> F:
            spec = declare(func, name, *schedule)
            self.registry.register_workflow(
                func, name=name, task_queue=task_queue, max_per_key=max_per_key, priority=priority
            )
            if spec is not None:
                self.declared.append(spec)
            return func

        return decorate(fn) if fn is not None else decorate
