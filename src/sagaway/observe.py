"""Where the engine reports what it does, for metrics and traces (``sagaway.telemetry``).

The engine calls the functions of this module at the moments that matter (a workflow created,
ended or suspended, an activity attempt, a recovery takeover, a lost lease, a batch written).
Each hands the report to the installed observers; with none installed (the default) a report
costs one truth test. Observers are installed process-wide, as metrics registries and tracer
providers are.

Spans have a beginning and an end: ``execution`` and ``attempt`` return a ``Span`` that the
engine ends in the same task, so an observer may make its span current (``contextvars``) in
between, and the code that runs inside (an activity, the workflow function) sees it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from typing import Any, Generic, TypeVar

logger = logging.getLogger(__name__)
ObserverT = TypeVar("ObserverT", bound="Observer")


class Span:
    """One execution or attempt being observed; ``end`` is called once, in the same task."""

    __slots__ = ()

    def end(self, outcome: str, error: BaseException | None = None) -> None:
        """``outcome``: a lower-case word (``completed``, ``failed``, ``retrying``, ``error``,
        ``suspended``, ``waiting``, ``cancelled``, ``lease_lost``...)."""


NO_SPAN = Span()


class Observer:
    """Receives the engine's reports; every method does nothing unless overridden."""

    def workflow_started(self, name: str, key: str) -> None:
        """This process created an execution of workflow ``name``: a start, a child, a
        schedule's tick or trigger, a fork (an Engine Server: a ``StartWorkflow``)."""

    def workflow_ended(self, name: str, key: str, status: str) -> None:
        """An execution ended by this process: COMPLETED, FAILED, CANCELLED or TERMINATED."""

    def workflow_suspended(self, name: str, key: str) -> None:
        """An execution run by this process stopped SUSPENDED (recovery retries it later)."""

    def took_over(self, name: str, key: str, previous_owner: str) -> None:
        """Recovery claimed an execution whose owner's lease had expired."""

    def lease_lost(self, name: str, key: str) -> None:
        """This process found that another one owns an execution it was running."""

    def attempt_ended(self, name: str, outcome: str, seconds: float, *, compensation: bool) -> None:
        """One attempt of an activity (or compensation) ended: ``completed``, ``failed`` (a
        business error), ``retrying``, or ``error`` (it stops the workflow)."""

    def batch_written(self, operation: str, size: int, seconds: float) -> None:
        """A group commit wrote ``size`` requests of one kind in one statement."""

    def connection_waited(self, seconds: float) -> None:
        """A statement waited ``seconds`` (over a second) for a pooled database connection:
        all of the pool's connections were busy, or the server refused new ones."""

    def trace_context(self, name: str, key: str) -> str | None:
        """The trace context to store with an execution about to be created (JSON), if any."""
        return None

    def execution(self, name: str, key: str, run_id: str, trace_context: str | None) -> Span:
        """An execution begins to run in this process (first run, replay or resumption)."""
        return NO_SPAN

    def attempt(
        self,
        name: str,
        key: str,
        run_id: str,
        call_id: str,
        attempt: int,
        *,
        compensation: bool,
    ) -> Span:
        """One attempt of an activity or compensation begins."""
        return NO_SPAN


class _Spans(Span):
    """The spans of the observers, ended together (in reverse order of beginning); an
    observer's failure is logged, never raised into the workflow."""

    __slots__ = ("_spans",)

    def __init__(self, spans: Sequence[Span]) -> None:
        self._spans = spans

    def end(self, outcome: str, error: BaseException | None = None) -> None:
        for span in reversed(self._spans):
            try:
                span.end(outcome, error)
            except Exception:
                _failed(span)


def _failed(what: object) -> None:
    logger.warning("telemetry observer %r failed; the workflow goes on", what, exc_info=True)


def _each(report: Callable[[Observer], Any]) -> None:
    """``report`` to every observer; one that fails is logged and skipped: telemetry must never
    change what a workflow does."""
    for observer in observers:
        try:
            report(observer)
        except Exception:
            _failed(observer)


observers: tuple[Observer, ...] = ()
"""The installed observers; read it (``if observe.observers:``) before building a report."""


def install(observer: Observer) -> None:
    """Send the engine's reports to ``observer`` too (from now on, in this process)."""
    global observers
    if observer not in observers:
        observers = (*observers, observer)


def uninstall(observer: Observer) -> None:
    global observers
    observers = tuple(o for o in observers if o is not observer)


class Installed(Generic[ObserverT]):
    """The one observer of a kind (``sagaway.telemetry``'s metrics, its tracing) installed in
    this process: changed with ``lock`` held."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.current: ObserverT | None = None

    def put(self, observer: ObserverT | None) -> None:
        """Install ``observer`` (None: none) in place of the current one; ``lock`` held."""
        if self.current is not None:
            uninstall(self.current)
        self.current = observer
        if observer is not None:
            install(observer)

    def clear(self) -> None:
        """Uninstall the current one, if any."""
        with self.lock:
            self.put(None)


def workflow_started(name: str, key: str) -> None:
    _each(lambda o: o.workflow_started(name, key))


def workflow_ended(name: str, key: str, status: str) -> None:
    _each(lambda o: o.workflow_ended(name, key, status))


def workflow_suspended(name: str, key: str) -> None:
    _each(lambda o: o.workflow_suspended(name, key))


def took_over(name: str, key: str, previous_owner: str) -> None:
    _each(lambda o: o.took_over(name, key, previous_owner))


def lease_lost(name: str, key: str) -> None:
    _each(lambda o: o.lease_lost(name, key))


def attempt_ended(name: str, outcome: str, seconds: float, *, compensation: bool) -> None:
    _each(lambda o: o.attempt_ended(name, outcome, seconds, compensation=compensation))


def batch_written(operation: str, size: int, seconds: float) -> None:
    _each(lambda o: o.batch_written(operation, size, seconds))


def connection_waited(seconds: float) -> None:
    _each(lambda o: o.connection_waited(seconds))


def trace_context(name: str, key: str) -> str | None:
    for observer in observers:
        try:
            found = observer.trace_context(name, key)
        except Exception:
            _failed(observer)
            continue
        if found is not None:
            return found
    return None


def execution(name: str, key: str, run_id: str, trace_context: str | None) -> Span:
    return _begin(lambda o: o.execution(name, key, run_id, trace_context))


def attempt(
    name: str, key: str, run_id: str, call_id: str, attempt: int, *, compensation: bool
) -> Span:
    return _begin(
        lambda o: o.attempt(name, key, run_id, call_id, attempt, compensation=compensation)
    )


def _begin(begin: Callable[[Observer], Span]) -> Span:
    spans = []
    for observer in observers:
        try:
            span = begin(observer)
        except Exception:
            _failed(observer)
            continue
        if span is not NO_SPAN:
            spans.append(span)
    return _Spans(spans) if spans else NO_SPAN
