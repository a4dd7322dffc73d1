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

from collections.abc import Sequence


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
        """This process created an execution of workflow ``name`` (a child too)."""

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
    """The spans of several observers, ended together (in reverse order of beginning)."""

    __slots__ = ("_spans",)

    def __init__(self, spans: Sequence[Span]) -> None:
        self._spans = spans

    def end(self, outcome: str, error: BaseException | None = None) -> None:
        for span in reversed(self._spans):
            span.end(outcome, error)


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


def workflow_started(name: str, key: str) -> None:
    for observer in observers:
        observer.workflow_started(name, key)


def workflow_ended(name: str, key: str, status: str) -> None:
    for observer in observers:
        observer.workflow_ended(name, key, status)


def workflow_suspended(name: str, key: str) -> None:
    for observer in observers:
        observer.workflow_suspended(name, key)


def took_over(name: str, key: str, previous_owner: str) -> None:
    for observer in observers:
        observer.took_over(name, key, previous_owner)


def lease_lost(name: str, key: str) -> None:
    for observer in observers:
        observer.lease_lost(name, key)


def attempt_ended(name: str, outcome: str, seconds: float, *, compensation: bool) -> None:
    for observer in observers:
        observer.attempt_ended(name, outcome, seconds, compensation=compensation)


def batch_written(operation: str, size: int, seconds: float) -> None:
    for observer in observers:
        observer.batch_written(operation, size, seconds)


def trace_context(name: str, key: str) -> str | None:
    for observer in observers:
        found = observer.trace_context(name, key)
        if found is not None:
            return found
    return None


def execution(name: str, key: str, run_id: str, trace_context: str | None) -> Span:
    spans = [o.execution(name, key, run_id, trace_context) for o in observers]
    return _one(spans)


def attempt(
    name: str, key: str, run_id: str, call_id: str, attempt: int, *, compensation: bool
) -> Span:
    spans = [
        o.attempt(name, key, run_id, call_id, attempt, compensation=compensation) for o in observers
    ]
    return _one(spans)


def _one(spans: list[Span]) -> Span:
    real = [s for s in spans if s is not NO_SPAN]
    if not real:
        return NO_SPAN
    return real[0] if len(real) == 1 else _Spans(real)
