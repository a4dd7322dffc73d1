"""OpenTelemetry traces of workflows (``opentelemetry-api``; bring your own SDK and exporter).

``enable_tracing()`` installs an observer (``sagaway.observe``) that makes these spans:

- ``StartWorkflow:<name>``: when a process creates an execution, as a child of whatever span is
  current there (an HTTP request's, say). Its context is stored with the execution (W3C trace
  context), so every later span of that execution, in whatever process runs it, joins its trace.
- ``RunWorkflow:<name>``: each time a process runs the execution (its first run, a replay after
  a wait, a takeover after a crash), a child of the start span.
- ``RunActivity:<name>`` / ``RunCompensation:<name>``: each attempt, a child of the run's span.
  The span is current while the activity's code runs, so spans it makes are its children.

Attributes: ``sagaway.workflow.key``, ``sagaway.workflow.name``, ``sagaway.run_id``,
``sagaway.step`` (the call id), ``sagaway.attempt`` and ``sagaway.outcome``. A child workflow
started by a workflow joins its parent's trace.

Sampling is decided once per workflow, by the provider's sampler at its start span, and stored
with its context: a run or attempt of a trace sampled out makes no span at all (the stored
context is made current instead), so a ratio sampler cuts the cost in proportion.
"""

from __future__ import annotations

import importlib.metadata
import json

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Status, StatusCode, Tracer, TracerProvider
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from sagaway import observe

_PROPAGATOR = TraceContextTextMapPropagator()
_FAILED = frozenset({"failed", "error", "retrying", "suspended", "interrupted", "stopped"})


class _Joined(observe.Span):
    """A run of an execution whose trace was sampled out: no span is made (a span the sampler
    drops costs nearly what a recorded one does), but the stored context is made current, so
    the spans of activity code join the trace and share its sampling decision."""

    __slots__ = ("_token",)

    def __init__(self, parent: otel_context.Context) -> None:
        self._token = otel_context.attach(parent)

    def end(self, outcome: str, error: BaseException | None = None) -> None:
        otel_context.detach(self._token)


class _OtelSpan(observe.Span):
    __slots__ = ("_span", "_token")

    def __init__(self, span: trace.Span) -> None:
        self._span = span
        self._token = otel_context.attach(trace.set_span_in_context(span))

    def end(self, outcome: str, error: BaseException | None = None) -> None:
        span = self._span
        span.set_attribute("sagaway.outcome", outcome)
        if error is not None:
            span.record_exception(error)
        if outcome in _FAILED:
            span.set_status(Status(StatusCode.ERROR, outcome))
        span.end()
        otel_context.detach(self._token)


class TracingObserver(observe.Observer):
    """Makes the spans described in the module's docstring with one tracer."""

    def __init__(self, tracer: Tracer) -> None:
        self.tracer = tracer

    def trace_context(self, name: str, key: str) -> str | None:
        span = self.tracer.start_span(
            f"StartWorkflow:{name}",
            kind=trace.SpanKind.PRODUCER,
            attributes={"sagaway.workflow.name": name, "sagaway.workflow.key": key},
        )
        try:
            if not span.get_span_context().is_valid:
                return None  # no SDK configured: nothing to join later
            carrier: dict[str, str] = {}
            _PROPAGATOR.inject(carrier, context=trace.set_span_in_context(span))
            return json.dumps(carrier, separators=(",", ":"))
        finally:
            span.end()

    def execution(
        self, name: str, key: str, run_id: str, trace_context: str | None
    ) -> observe.Span:
        parent = _parent(trace_context)
        if parent is not None:
            stored = trace.get_current_span(parent).get_span_context()
            if stored.is_valid and not stored.trace_flags.sampled:
                return _Joined(parent)
        span = self.tracer.start_span(
            f"RunWorkflow:{name}",
            context=parent,
            kind=trace.SpanKind.CONSUMER,
            attributes={
                "sagaway.workflow.name": name,
                "sagaway.workflow.key": key,
                "sagaway.run_id": run_id,
            },
        )
        return _OtelSpan(span)

    def attempt(
        self,
        name: str,
        key: str,
        run_id: str,
        call_id: str,
        attempt: int,
        *,
        compensation: bool,
    ) -> observe.Span:
        current = trace.get_current_span().get_span_context()
        if current.is_valid and not current.trace_flags.sampled:
            return observe.NO_SPAN  # the run's trace is sampled out: so is its attempt
        kind = "RunCompensation" if compensation else "RunActivity"
        span = self.tracer.start_span(
            f"{kind}:{name}",
            attributes={
                "sagaway.workflow.key": key,
                "sagaway.step": call_id,
                "sagaway.attempt": attempt,
            },
        )
        return _OtelSpan(span)


def _parent(trace_context: str | None) -> otel_context.Context | None:
    """The stored start span as a parent (None: the run's span starts a trace)."""
    if not trace_context:
        return None
    try:
        carrier = json.loads(trace_context)
    except ValueError:
        return None  # written by something else: tracing must never stop a workflow
    if not isinstance(carrier, dict):
        return None
    return _PROPAGATOR.extract(carrier)


_installed: observe.Installed[TracingObserver] = observe.Installed()


def enable_tracing(tracer_provider: TracerProvider | None = None) -> None:
    """Make spans of workflows, runs and attempts with ``tracer_provider`` (default: the
    global one, ``opentelemetry.trace.set_tracer_provider``). Calling it again replaces the
    provider."""
    tracer = trace.get_tracer("sagaway", _version(), tracer_provider=tracer_provider)
    with _installed.lock:
        _installed.put(TracingObserver(tracer))


def _version() -> str | None:
    try:
        return importlib.metadata.version("sagaway")
    except importlib.metadata.PackageNotFoundError:
        return None


def disable_tracing() -> None:
    """Stop making spans."""
    _installed.clear()
