"""Registry: the workflows and activities a Manager knows, by name and by function."""

from __future__ import annotations

import dataclasses
import inspect
import warnings
from collections.abc import Callable, Mapping
from typing import Any, Literal, TypeVar

from sagaway import errors, identifiers, retry
from sagaway.serialization import FunctionCodec

QueueScope = Literal["process", "cluster"]


@dataclasses.dataclass(frozen=True, slots=True)
class Queue:
    """Limits for the activities of one queue: per process (``scope="process"``, the default)
    or for every process of the database together (``scope="cluster"``, kept in the database;
    see docs/limits.md)."""

    concurrency: int | None = None
    """Activities of this queue running at once (None: unlimited)."""
    rate_per_second: float | None = None
    """Activity starts per second (None: unlimited); starts are spaced ``1/rate`` apart."""
    scope: QueueScope = "process"
    """``"process"``: each process keeps its own count; ``"cluster"``: all processes share one."""

    def __post_init__(self) -> None:
        if self.concurrency is not None and (
            isinstance(self.concurrency, bool) or not isinstance(self.concurrency, int)
        ):
            raise TypeError("Queue.concurrency must be an int (or None)")
        if self.concurrency is not None and self.concurrency < 1:
            raise ValueError("Queue.concurrency must be >= 1")
        if self.rate_per_second is not None and not (0 < self.rate_per_second < float("inf")):
            raise ValueError("Queue.rate_per_second must be > 0 and finite")
        if self.scope not in ("process", "cluster"):
            raise ValueError(f"Queue.scope must be 'process' or 'cluster', not {self.scope!r}")
        if self.scope == "cluster" and self.concurrency is None and self.rate_per_second is None:
            raise ValueError(
                "a cluster-wide Queue needs a limit: concurrency=, rate_per_second= or both"
            )

    @property
    def cluster(self) -> bool:
        return self.scope == "cluster"


@dataclasses.dataclass(frozen=True, slots=True, eq=False)
class ActivityDef:
    name: str
    fn: Callable[..., Any]
    is_async: bool
    codec: FunctionCodec
    retry: retry.RetryPolicy
    timeout: float | None
    queue: str | None
    priority: int | None = None
    """Its calls' level in a saturated queue (None: the calling workflow's)."""


@dataclasses.dataclass(frozen=True, slots=True, eq=False)
class WorkflowDef:
    name: str
    fn: Callable[..., Any]
    codec: FunctionCodec
    task_queue: str = "default"
    """Which workers run it: a worker given a list of task queues runs only workflows of
    those (not to be confused with an activity's ``queue``, a concurrency and rate limit)."""
    max_per_key: int = 1
    """Executions started with one ``concurrency_key`` that may run at once (cluster-wide)."""
    priority: int | None = None
    """Its starts' level when a start gives none (None: the parent's, else 3)."""


D = TypeVar("D", ActivityDef, WorkflowDef)


def default_name(fn: Callable[..., Any]) -> str:
    """The name a function is registered under when none is given: its qualified name."""
    qualname = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None)
    if not qualname:
        raise TypeError(f"cannot name {fn!r}; pass name=...")
    return str(qualname).replace(".<locals>.", ".")


class Registry:
    """Explicitly registered functions, looked up by name (as stored) or by function."""

    def __init__(self) -> None:
        self._by_name: dict[str, ActivityDef | WorkflowDef] = {}
        self._by_fn: dict[Callable[..., Any], ActivityDef | WorkflowDef] = {}

    def _add(self, defn: ActivityDef | WorkflowDef, *aliases: Callable[..., Any]) -> None:
        kind = "an activity" if isinstance(defn, ActivityDef) else "a workflow"
        identifiers.check_name(defn.name, f"{kind} name")
        existing = self._by_name.get(defn.name)
        if existing is not None:
            raise errors.AlreadyRegistered(
                f"{defn.name!r} is already registered (to {existing.fn!r}); "
                "give one of them another name with name=..."
            )
        self._by_name[defn.name] = defn
        for fn in (defn.fn, *aliases):
            self._by_fn[fn] = defn

    def add_alias(self, defn: ActivityDef | WorkflowDef, fn: Callable[..., Any]) -> None:
        self._by_fn[fn] = defn

    def register_activity(
        self,
        fn: Callable[..., Any],
        *,
        name: str | None,
        retry_policy: retry.RetryPolicy | None,
        timeout: float | None,
        queue: str | None,
        priority: int | None = None,
    ) -> ActivityDef:
        if not callable(fn):
            raise TypeError(f"register_activity expects a function, got {fn!r}")
        if timeout is not None and timeout <= 0:
            raise ValueError("activity timeout must be > 0 seconds")
        if retry_policy is not None and not isinstance(retry_policy, retry.RetryPolicy):
            raise TypeError("retry must be a sagaway.RetryPolicy")
        activity_name = name or default_name(fn)
        defn = ActivityDef(
            name=activity_name,
            fn=fn,
            is_async=inspect.iscoroutinefunction(fn),
            codec=FunctionCodec(fn, f"activity {activity_name!r}"),
            retry=retry_policy or retry.DEFAULT,
            timeout=timeout,
            queue=queue,
            priority=priority,
        )
        self._add(defn)
        return defn

    def register_workflow(
        self,
        fn: Callable[..., Any],
        *,
        name: str | None,
        task_queue: str = "default",
        max_per_key: int = 1,
        priority: int | None = None,
    ) -> WorkflowDef:
        if not inspect.iscoroutinefunction(fn):
            raise TypeError(
                f"workflow {default_name(fn)!r} must be an async function (async def): "
                "workflows await durable calls"
            )
        if not isinstance(task_queue, str) or not task_queue:
            raise ValueError("a workflow's task_queue is a non-empty string")
        if isinstance(max_per_key, bool) or not isinstance(max_per_key, int) or max_per_key < 1:
            raise ValueError(f"max_per_key must be an int >= 1, not {max_per_key!r}")
        workflow_name = name or default_name(fn)
        defn = WorkflowDef(
            name=workflow_name,
            fn=fn,
            codec=FunctionCodec(fn, f"workflow {workflow_name!r}"),
            task_queue=task_queue,
            max_per_key=max_per_key,
            priority=priority,
        )
        self._add(defn)
        return defn

    def activity(self, ref: Callable[..., Any] | str) -> ActivityDef:
        """The activity registered as ``ref`` (function or name)."""
        defn = self._by_name.get(ref) if isinstance(ref, str) else self._by_fn.get(ref)
        if type(defn) is ActivityDef:  # every call of an activity asks: the short way first
            return defn
        return self._lookup_as(
            ref, ActivityDef, "a workflow, not an activity; start it with manager.workflow(...)"
        )

    def workflow(self, ref: Callable[..., Any] | str) -> WorkflowDef:
        """The workflow registered as ``ref`` (function or name)."""
        defn = self._by_name.get(ref) if isinstance(ref, str) else self._by_fn.get(ref)
        if type(defn) is WorkflowDef:
            return defn
        return self._lookup_as(
            ref,
            WorkflowDef,
            "an activity, not a workflow; call it with manager.activity(...) inside a workflow",
        )

    def _lookup_as(self, ref: Callable[..., Any] | str, kind: type[D], other: str) -> D:
        """``_lookup``, refused (``other``: what it is instead) unless it is a ``kind``."""
        defn = self._lookup(ref)
        if not isinstance(defn, kind):
            raise errors.NotRegistered(f"{_label(ref)} is registered as {other}")
        return defn

    def _lookup(self, ref: Callable[..., Any] | str) -> ActivityDef | WorkflowDef:
        defn = self._by_name.get(ref) if isinstance(ref, str) else self._by_fn.get(ref)
        if defn is None:
            known = ", ".join(sorted(self._by_name)) or "none"
            raise errors.NotRegistered(
                f"{_label(ref)} is not registered with this Manager (registered: {known}); "
                "decorate it with @manager.register_activity or @manager.register_workflow"
            )
        return defn

    def names(self) -> list[str]:
        return sorted(self._by_name)

    def task_queues(self) -> set[str]:
        """The task queues of the registered workflows (what a worker can serve)."""
        return {d.task_queue for d in self._by_name.values() if isinstance(d, WorkflowDef)}


def check_queue(queue: str | None, configured: Mapping[str, Queue]) -> None:
    """An activity's ``queue`` must be one the Manager was given limits for."""
    if queue is not None and queue not in configured:
        raise ValueError(
            f"queue {queue!r} is not configured; pass queues={{{queue!r}: sagaway.Queue(...)}} "
            "to the Manager"
        )


def task_queue_of(task_queue: str, queue: str | None) -> str:
    """``register_workflow``'s task queue, given as ``task_queue=`` or by its old name
    ``queue=`` (with a ``DeprecationWarning``)."""
    if queue is None:
        return task_queue
    warnings.warn(
        "register_workflow(queue=...) is now task_queue=...: `queue` names activity "
        "limits (sagaway.Queue), task queues route workflows to workers",
        DeprecationWarning,
        stacklevel=3,
    )
    if task_queue not in ("default", queue):
        raise ValueError(f"task_queue={task_queue!r} and queue={queue!r} disagree")
    return queue


def _label(ref: Callable[..., Any] | str) -> str:
    return repr(ref) if isinstance(ref, str) else repr(default_name(ref))
