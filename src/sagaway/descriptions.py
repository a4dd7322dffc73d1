"""Descriptions of workflow executions: what ``describe()`` and listings return.

Read models built from the stored records, with every payload left as JSON (undecoded): a
stored value that cannot be read becomes a ``problem`` of the description instead of an error,
so an operator can look at a workflow whose rows were altered outside Sagaway.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

from sagaway import _cancel_log, _sealed, errors, serialization
from sagaway._cancel_log import CancelRequestDescription
from sagaway._engine import audit, flow_control
from sagaway._engine.audit import AuditEntry
from sagaway.states import StepKind, StepStatus, WorkflowStatus
from sagaway.store.base import Store
from sagaway.store.records import (
    AttemptErrorRecord,
    AuditQuery,
    SignalRecord,
    StepRecord,
    WorkflowRecord,
)

MAX_AUDIT = 1000
"""Audit entries ``describe()`` reads at most (the latest): ``sagaway audit`` lists them all."""


@dataclasses.dataclass(frozen=True, slots=True)
class StepDescription:
    """One durable call of a workflow, as recorded."""

    call_id: str
    kind: StepKind
    name: str
    status: StepStatus
    attempts: int
    error: dict[str, Any] | None
    started_at: float
    ended_at: float | None
    """When it ended; for a receive still WAITING its deadline (None without a timeout), for
    a sleep its wake-up time."""
    result: Any = None
    """The step's recorded output, as JSON (undecoded into the function's return type): an
    activity's result, a received signal's payload, a child's key, a sleep's wake-up time
    (epoch seconds: see ``wakes_at``)."""
    attempt_errors: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    """The error of each failed attempt, oldest first (the last 20 attempts are kept): the
    keys of ``error`` plus ``attempt`` (1 for the first) and ``at`` (when it failed). A step
    that succeeded after retries keeps the errors of the attempts before."""

    @property
    def duration(self) -> float | None:
        """Seconds from its start to its end; None while it waits (it has not ended)."""
        if self.ended_at is None or self.status is StepStatus.WAITING:
            return None
        return self.ended_at - self.started_at

    @property
    def wakes_at(self) -> float | None:
        """A sleep's wake-up time (epoch seconds); None for every other kind of step."""
        if self.kind is not StepKind.SLEEP or isinstance(self.result, bool):
            return None
        return float(self.result) if isinstance(self.result, (int, float)) else None


@dataclasses.dataclass(frozen=True, slots=True)
class SignalDescription:
    """A signal sent to a workflow execution, and what became of it."""

    id: int
    name: str
    payload: Any
    """As JSON (undecoded)."""
    dedupe_id: str | None
    sent_at: float
    state: str
    """'pending' (not received yet), 'delivered' or 'rejected'."""
    delivered_to: str | None = None
    """The call id of the ``receive`` that got it."""
    handled_at: float | None = None
    """When it was delivered or rejected."""
    rejected: str | None = None
    """Why it was not delivered (its payload did not fit the receiver's type)."""


@dataclasses.dataclass(frozen=True, slots=True)
class WorkflowDescription:
    """A workflow execution and its recorded steps."""

    key: str
    run_id: str
    name: str
    status: WorkflowStatus
    result: Any
    """The JSON result when COMPLETED (undecoded)."""
    error: dict[str, Any] | None
    """The recorded error (FAILED, SUSPENDED, CANCELLED): kind, type, message, traceback."""
    parent_key: str | None
    created_at: float
    updated_at: float
    ended_at: float | None
    owner: str | None
    """Process holding the lease, while RUNNING."""
    next_run_at: float | None
    suspend_count: int
    steps: list[StepDescription]
    children: list[str] = dataclasses.field(default_factory=list)
    """Keys of the child workflows it started."""
    waiting_for: str | None = None
    """While WAITING: 'signal:<name>', 'timer' or 'child:<key>' (from its last step)."""
    problems: list[str] = dataclasses.field(default_factory=list)
    """What could not be read (rows altered outside Sagaway), each saying where and why; the
    rest is described all the same."""
    input: Any = None
    """The workflow's arguments, as the JSON object of its bound parameters (undecoded)."""
    lease_expires_at: float | None = None
    """When the lease of ``owner`` runs out unless renewed (its heartbeat renews it)."""
    signals: list[SignalDescription] = dataclasses.field(default_factory=list)
    """Signals sent to it, in order: pending, delivered and rejected (``describe()`` only)."""
    code_version: str | None = None
    """The application code version (``Manager(version=...)``) of the process that created it;
    None: unversioned."""
    concurrency_key: str | None = None
    """The key of its per-key limit (``execute(concurrency_key=...)``); None: none."""
    cancel_requests: list[CancelRequestDescription] = dataclasses.field(default_factory=list)
    """Cancel requests made to it, in order, each with its fate (``describe()`` only)."""
    audit: list[AuditEntry] = dataclasses.field(default_factory=list)
    """The operator actions on it (cancel, terminate, retry, ...), oldest first: who, what,
    when, why (``describe()`` only; at most the latest ``MAX_AUDIT``)."""
    paused: bool = False
    """Paused by an operator (``handle.pause()``): no worker runs it until it is resumed."""
    ordering_key: str | None = None
    """The key of its per-key order (``execute(ordering_key=...)``); None: none."""
    ordering_seq: int | None = None
    """With an ordering key: its place number in the key's line (lower runs first)."""
    waits_behind: str | None = None
    """While in line behind others (``describe()`` only): the key of the execution of its
    ordering key directly before it; None at the head of the line or without a key."""
    ahead_in_line: int | None = None
    """While in its key's line (``describe()`` only): how many run or wait before it."""
    debounce_key: str | None = None
    """The debounce key it was started with (``execute(debounce_key=...)``); while PENDING
    it starts at ``next_run_at`` unless a new start of the key postpones it."""
    priority: int = 3
    """Its priority, 1 (lowest) .. 5 (highest) (``execute(priority=...)``)."""
    fairness_key: str | None = None
    """The tenant its start is counted for (``execute(fairness_key=...)``); None: none."""
    fairness_weight: float = 1.0
    """Its key's share of claims while starts wait (``execute(fairness_weight=...)``)."""
    start_place: int | None = None
    """While PENDING (``describe()`` only): how many due starts workers take before it (0: it
    is next; the due work of started workflows goes before any start)."""
    queue_wait: tuple[str, int, int] | None = None
    """While an activity call of it waits for a cluster-wide queue (``describe()`` only): the
    queue, the call's priority and how many waiting calls go before it."""

    @property
    def cursor(self) -> str:
        """Where a listing that ends with this workflow goes on: pass it as
        ``Manager.list_workflows(after=...)`` (or ``sagaway list --after``) for the next page."""
        return f"{self.created_at!r}:{self.run_id}"


def describe(
    record: WorkflowRecord,
    steps: list[StepRecord],
    problems: list[str] | None = None,
    *,
    attempt_errors: list[AttemptErrorRecord] | None = None,
    signals: list[SignalRecord] | None = None,
    paused: bool = False,
) -> WorkflowDescription:
    """The description of ``record`` with its ``steps`` (unreadable values go to ``problems``)."""
    problems = [] if problems is None else problems

    def load(text: str | None, what: str) -> Any:
        if text is None:
            return None
        if _sealed.is_sealed(text):
            return _sealed.SEALED_MARKER  # no key here: shown, never decoded
        try:
            return serialization.load_json(text, what)
        except errors.PayloadError as exc:
            problems.append(f"workflow {record.key!r}: {exc}")
            return None

    history: dict[str, list[dict[str, Any]]] = {}
    for e in attempt_errors or ():
        summary = serialization.error_summary(e.error) or {}
        history.setdefault(e.call_id, []).append({**summary, "attempt": e.attempt, "at": e.at})
    return WorkflowDescription(
        key=record.key,
        run_id=record.run_id,
        name=record.name,
        status=record.status,
        result=load(record.result, "result"),
        input=load(record.args, "input"),
        lease_expires_at=record.lease_expires_at,
        paused=paused,
        signals=[_signal(s, load) for s in signals or ()],
        problems=problems,
        error=serialization.error_summary(record.error),
        parent_key=record.parent_key,
        created_at=record.created_at,
        updated_at=record.updated_at,
        ended_at=record.ended_at,
        owner=record.lease_owner,
        next_run_at=record.next_run_at,
        suspend_count=record.suspend_count,
        code_version=record.code_version,
        concurrency_key=record.concurrency_key,
        ordering_key=record.ordering_key,
        ordering_seq=record.ordering_seq,
        debounce_key=record.debounce_key,
        priority=record.priority,
        fairness_key=record.fairness_key or None,
        fairness_weight=record.fairness_weight,
        children=[
            _child_key(s.result) for s in steps if s.kind is StepKind.CHILD and s.result is not None
        ],
        waiting_for=_waiting_for(record, steps),
        steps=[_step(s, load, history.get(s.call_id, [])) for s in steps],
    )


async def read(store: Store, record: WorkflowRecord, *, now: float) -> WorkflowDescription:
    """The description of ``record`` with all that is stored about it: its steps, the error of
    each failed attempt, its signals, cancel requests and audit trail (the latest
    ``MAX_AUDIT``), whether it is paused, and while it waits to start, its place in its
    ordering key's line and among the due starts at ``now`` (``handle.describe()``,
    ``sagaway show``)."""
    attempt_errors = await store.list_attempt_errors(record.run_id)
    signals = await store.list_signals(record.run_id)
    requests = await store.list_cancel_requests(record.run_id)
    trail = await store.list_audit(AuditQuery(run_id=record.run_id, limit=MAX_AUDIT))
    try:
        steps = await store.load_steps(record.run_id)
    except errors.CorruptRecord as exc:
        # Describe what can be read: the workflow, and why its steps are not shown.
        described = describe(record, [], [f"steps not shown: {exc}"], signals=signals)
        steps = []
    else:
        described = describe(record, steps, attempt_errors=attempt_errors, signals=signals)
    return dataclasses.replace(
        described,
        cancel_requests=_cancel_log.describe(record, steps, requests),
        audit=[audit.entry(r) for r in reversed(trail)],
        paused=bool(await store.paused_runs([record.run_id])),
        **flow_control.described_place(await flow_control.place_in_line(store, record)),
        start_place=(
            await store.start_place(record.run_id, now=now)
            if record.status is WorkflowStatus.PENDING
            else None
        ),
        **(await _queue_wait(store, record, described.waiting_for, now)),
    )


async def _queue_wait(
    store: Store, record: WorkflowRecord, waiting_for: str | None, now: float
) -> dict[str, Any]:
    """``WorkflowDescription.queue_wait`` (read for a started, live execution only), and
    ``waiting_for`` ``queue:<name>`` while it is unloaded for it."""
    if record.status not in (WorkflowStatus.RUNNING, WorkflowStatus.WAITING):
        return {}
    place = await store.queue_place(record.run_id, now=now)
    if place is None:
        return {}
    if waiting_for is None and record.status is WorkflowStatus.WAITING:
        waiting_for = f"queue:{place.queue}"
    return {"queue_wait": (place.queue, place.priority, place.ahead), "waiting_for": waiting_for}


def _step(
    s: StepRecord, load: Callable[[str | None, str], Any], attempt_errors: list[dict[str, Any]]
) -> StepDescription:
    return StepDescription(
        call_id=s.call_id,
        kind=s.kind,
        name=s.name,
        status=s.status,
        attempts=s.attempts,
        error=serialization.error_summary(s.error),
        started_at=s.started_at,
        ended_at=s.ended_at,
        result=load(s.result, f"output of step {s.call_id}"),
        attempt_errors=attempt_errors,
    )


def _signal(s: SignalRecord, load: Callable[[str | None, str], Any]) -> SignalDescription:
    state = "pending" if s.consumed_at is None else "rejected" if s.rejected else "delivered"
    return SignalDescription(
        id=s.id,
        name=s.name,
        payload=load(s.payload, f"payload of signal {s.id}"),
        dedupe_id=s.dedupe_id,
        sent_at=s.created_at,
        state=state,
        delivered_to=s.consumed_call,
        handled_at=s.consumed_at,
        rejected=s.rejected,
    )


def _child_key(text: str) -> str:
    try:
        return str(serialization.load_json(text, "child key"))
    except errors.PayloadError:
        return f"<unreadable child key {text[:80]!r}>"


def _waiting_for(record: WorkflowRecord, steps: list[StepRecord]) -> str | None:
    if record.status is not WorkflowStatus.WAITING or not steps:
        return None
    last = max(steps, key=lambda s: s.started_at)
    if last.kind is StepKind.SIGNAL:
        return f"signal:{last.name}"
    if last.kind is StepKind.SLEEP:
        return "timer"
    if last.kind is StepKind.CHILD:
        return f"child:{_child_key(last.result)}" if last.result else None
    return None


def parse_cursor(cursor: str) -> tuple[float, str]:
    """(created_at, run_id) from ``WorkflowDescription.cursor``."""
    created, sep, run_id = cursor.partition(":")
    try:
        at = float(created)
    except ValueError:
        at = math.nan
    if not sep or not run_id or not math.isfinite(at):
        raise ValueError(f"not a listing cursor: {cursor!r} (expected CREATED_AT:RUN_ID)")
    return at, run_id
