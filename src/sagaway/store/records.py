"""Plain records exchanged between the engine and a Store. No behaviour."""

from __future__ import annotations

import dataclasses

from sagaway.states import StepKind, StepStatus, WorkflowStatus
from sagaway.store.audit_records import AuditNote, AuditQuery, AuditRecord

__all__ = [
    "WorkflowRecord",
    "StepRecord",
    "SignalRecord",
    "CancelRequestRecord",
    "PausedCallRecord",
    "NewWorkflow",
    "Lease",
    "AttemptErrorRecord",
    "ListQuery",
    "ScheduleRecord",
    "StepPayloads",
    "OutputPayload",
    "ForkPayloads",
    "ForkRequest",
    "SchedulePause",
    "ScheduleFire",
    "SchedulePut",
    "SignalReceive",
    "QueueAdmission",
    "QueuePlace",
    "AuditNote",
    "AuditRecord",
    "AuditQuery",
    "OutputWrite",
    "OutputRecord",
    "SearchAttribute",
    "AttributeFilter",
    "Publication",
]


@dataclasses.dataclass(frozen=True, slots=True)
class WorkflowRecord:
    """One workflow execution as stored."""

    run_id: str
    key: str
    name: str
    args: str
    """JSON object of the bound arguments."""
    args_hash: str
    status: WorkflowStatus
    result: str | None
    """JSON of the return value when COMPLETED."""
    error: str | None
    """JSON description of the last error (FAILED, SUSPENDED)."""
    parent_key: str | None
    created_at: float
    updated_at: float
    ended_at: float | None
    lease_owner: str | None
    lease_expires_at: float | None
    next_run_at: float | None
    suspend_count: int
    key_space: str | None = None
    """Prefix of the idempotency keys this execution derives (``sagaway._engine.keys``); None
    for an execution created before key spaces existed (its keys are ``<key>/<call id>``)."""
    cancel_reason: str | None = None
    """Set by a cancel request: the workflow sees ``Cancelled`` at its next durable call."""
    deadline_at: float | None = None
    """When the workflow is cancelled as by a request (``execute(..., deadline=)``)."""
    trace_context: str | None = None
    """The W3C trace context (JSON) of the code that started it; None when tracing was off."""
    code_version: str | None = None
    """The version of the application code (``Manager(version=...)``) of the process that
    created it; None: unversioned. Workers given a set of versions claim only those."""
    concurrency_key: str | None = None
    """Its per-key limit's key (``execute(concurrency_key=...)``): while PENDING it is claimed
    only if fewer than its limit of the key's executions run. None: no such limit."""
    previous_owner: str | None = dataclasses.field(default=None, compare=False)
    """Only on a record returned by ``Store.claim_due``: the process whose expired lease the
    claim took over (a recovery takeover); None for a run nobody held. Not stored."""
    ordering_key: str | None = None
    """Its per-key order's key (``execute(ordering_key=...)``): the key's executions run one at
    a time, in the order started. None: no order."""
    ordering_seq: int | None = None
    """With an ``ordering_key``: its place in the key's line (lower runs first; only the order
    among the key's live executions means anything)."""
    debounce_key: str | None = None
    """The debounce key it was started with (``execute(debounce_key=...)``): while PENDING,
    a new debounced start of the same workflow and key postpones it (``next_run_at``) and gives
    it its arguments. None: not debounced."""
    priority: int = 3
    """Its priority level, 1 (lowest) .. 5 (highest): due work is claimed higher first."""
    fairness_key: str = ""
    """The tenant its start is counted for (``execute(fairness_key=...)``); '': none."""
    fairness_weight: float = 1.0
    """Its key's share of claims while starts wait (``execute(fairness_weight=...)``)."""
    fair_pass: float | None = dataclasses.field(default=None, compare=False)
    """Its place in the fair queue of starts, given at creation (lower: claimed earlier);
    a place, not part of what the execution is (not compared)."""


@dataclasses.dataclass(frozen=True, slots=True)
class StepRecord:
    """The recorded outcome of one durable call of a workflow."""

    run_id: str
    call_id: str
    kind: StepKind
    name: str
    status: StepStatus
    attempts: int
    result: str | None
    error: str | None
    started_at: float
    ended_at: float | None


@dataclasses.dataclass(frozen=True, slots=True)
class SignalRecord:
    """A signal sent to a workflow execution."""

    id: int
    name: str
    payload: str
    dedupe_id: str | None
    created_at: float
    consumed_call: str | None
    """The durable call that received it."""
    consumed_at: float | None
    rejected: str | None
    """Why it was not delivered (its payload did not fit the receiver's type)."""


@dataclasses.dataclass(frozen=True, slots=True)
class CancelRequestRecord:
    """One cancel request made to a workflow execution (``Store.list_cancel_requests``)."""

    run_id: str
    reason: str
    requested_at: float
    accepted: bool
    """False: the execution had already ended (``request_cancel`` answered False)."""


@dataclasses.dataclass(frozen=True, slots=True)
class PausedCallRecord:
    """An activity (``kind`` ``activity``) or activity queue (``queue``) held paused in every
    process (``Store.pause_calls``)."""

    kind: str
    name: str
    reason: str
    paused_at: float


@dataclasses.dataclass(frozen=True, slots=True)
class NewWorkflow:
    """What is needed to create a workflow execution."""

    run_id: str
    key: str
    name: str
    args: str
    args_hash: str
    parent_key: str | None = None
    queue: str = "default"
    key_space: str | None = None
    """See ``WorkflowRecord.key_space``."""
    timeout: float | None = None
    """Seconds from its creation to its deadline (``WorkflowRecord.deadline_at``)."""
    trace_context: str | None = None
    """See ``WorkflowRecord.trace_context``."""
    code_version: str | None = None
    """See ``WorkflowRecord.code_version``."""
    concurrency_key: str | None = None
    """See ``WorkflowRecord.concurrency_key``."""
    max_per_key: int = 1
    """With a ``concurrency_key``: how many of the key's executions may run at once."""
    ordering_key: str | None = None
    """See ``WorkflowRecord.ordering_key``."""
    debounce_key: str | None = None
    """See ``WorkflowRecord.debounce_key``."""
    debounce: float | None = None
    """With a ``debounce_key``: seconds without a new start of the key before it starts."""
    debounce_max_wait: float | None = None
    """With a ``debounce_key``: the most seconds a burst waits from its first start (None: no
    bound)."""
    priority: int = 3
    """See ``WorkflowRecord.priority`` (0: the default, as a client that does not know the
    field sends it through the Engine Server)."""
    fairness_key: str = ""
    """See ``WorkflowRecord.fairness_key``."""
    fairness_weight: float = 1.0
    """See ``WorkflowRecord.fairness_weight``."""


@dataclasses.dataclass(frozen=True, slots=True)
class Lease:
    """Ownership of a workflow execution by one worker."""

    token: str
    """Unique per claim; every write of the owner is fenced by it."""
    owner: str
    """Human-readable id of the owning process."""
    expires_at: float


@dataclasses.dataclass(frozen=True, slots=True)
class AttemptErrorRecord:
    """The error of one failed attempt of a step (the last 20 attempts of a step are kept)."""

    call_id: str
    attempt: int
    """1 for the first attempt, counted across processes."""
    error: str
    """JSON description of the error, as in ``StepRecord.error``."""
    at: float | None
    """When the attempt failed."""


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ListQuery:
    """Which current executions ``Store.list_page`` returns: newest first (``created_at``
    descending, then ``run_id``), every filter given at once."""

    limit: int
    statuses: frozenset[WorkflowStatus] = frozenset()
    """Empty: any status."""
    name: str | None = None
    key_prefix: str = ""
    since: float | None = None
    """Created at or after this time."""
    until: float | None = None
    """Created before this time."""
    after: tuple[float, str] | None = None
    """Keyset cursor: only executions listed after the one with this (created_at, run_id)."""
    code_versions: frozenset[str | None] = frozenset()
    """Only executions created by these code versions (None in it: unversioned ones); empty:
    any version."""
    attributes: tuple[AttributeFilter, ...] = ()
    """Only executions whose search attributes match every one of these."""
    ordering_key: str | None = None
    """Only the executions of this ordering key (``execute(ordering_key=...)``)."""
    debounce_key: str | None = None
    """Only the executions started with this debounce key (``execute(debounce_key=...)``)."""
    priority: int | None = None
    """Only the executions of this priority level (``execute(priority=...)``)."""
    fairness_key: str | None = None
    """Only the executions counted for this fairness key (``execute(fairness_key=...)``)."""


@dataclasses.dataclass(frozen=True, slots=True)
class ScheduleRecord:
    """A schedule as stored: a workflow started at each tick of a cron expression."""

    id: str
    workflow: str
    """The registered name of the workflow it starts."""
    args: str
    """JSON object of the bound arguments each execution gets."""
    queue: str
    """The task queue of the executions it starts."""
    cron: str
    timezone: str
    """IANA time zone the cron expression is read in (``UTC``, ``Europe/Paris``)."""
    catch_up: str
    """What runs of the ticks missed while no scheduler ran: ``skip``, ``one`` or ``all``."""
    paused: bool
    next_tick_at: float
    """Epoch seconds of the earliest tick not started yet; schedulers advance it with a
    compare-and-set, so one of them wins each tick."""
    created_at: float
    updated_at: float
    last_tick_at: float | None = None
    """The latest tick an execution was started for (None: none yet)."""


@dataclasses.dataclass(frozen=True, slots=True)
class StepPayloads:
    """The result and error a fork stores for one kept step, instead of the source's."""

    call_id: str
    result: str | None
    error: str | None


@dataclasses.dataclass(frozen=True, slots=True)
class OutputPayload:
    """The value a fork stores for one published value it copies (the source's ``seq``)."""

    seq: int
    value: str


@dataclasses.dataclass(frozen=True, slots=True)
class ForkPayloads:
    """What a fork stores instead of copies of its source's payloads: the arguments, the
    result and error of kept steps, and the values of the events and stream items they
    published. A codec that binds payloads to their run (Encrypt) re-seals them for the new
    run; the store writes them in the fork's transaction."""

    args: str
    steps: tuple[StepPayloads, ...] = ()
    outputs: tuple[OutputPayload, ...] = ()
    """Each the new value of a copied output, named by its ``seq`` in the source."""


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ForkRequest:
    """One fork (``Store.fork_workflow``): the ended execution it copies and the new one."""

    source_run_id: str
    run_id: str
    key: str
    key_space: str
    call_ids: tuple[str, ...]
    """The source's steps the new execution keeps."""
    code_version: str | None = None
    """The code version of the process that forks (not the source's): see ``NewWorkflow``."""
    payloads: ForkPayloads | None = None
    """Replacing the copied arguments and step payloads (see ``Store.fork_workflow``)."""


@dataclasses.dataclass(frozen=True, slots=True)
class SchedulePut:
    """A schedule's definition to store (``Store.put_schedule``); ``keep_paused`` leaves the
    stored ``paused`` of one already there as it is."""

    schedule: ScheduleRecord
    keep_paused: bool = False


@dataclasses.dataclass(frozen=True, slots=True)
class SchedulePause:
    """Pausing or resuming the schedule ``id`` (``Store.set_schedule_paused``)."""

    id: str
    paused: bool
    next_tick_at: float
    """The next tick of a paused schedule resumed (the ticks of a pause are not caught up)."""


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ScheduleFire:
    """One firing of the schedule ``id`` (``Store.fire_schedule``): its ``next_tick_at`` from
    ``tick_at`` (as the scheduler read it) to ``next_tick_at``, and the executions it starts."""

    id: str
    tick_at: float
    next_tick_at: float
    last_tick_at: float | None
    starts: tuple[NewWorkflow, ...]


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class SignalReceive:
    """One wait of an owned execution for a signal (``Store.receive_signal``): the step
    ``call_id`` that records it, started at ``started_at``, waiting until ``deadline`` (None:
    no end) if ``wait`` and none is there."""

    run_id: str
    token: str
    name: str
    call_id: str
    started_at: float
    deadline: float | None
    wait: bool


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class QueueAdmission:
    """An activity attempt of ``holder`` asking to start under the limits of ``queue``
    (``Store.acquire_queue_slot``): at most ``concurrency`` at once, starts ``1/rate_per_second``
    apart (None: no such limit). ``run_id`` and ``call_id`` name the call while it waits (a
    waiter, kept in line by ``priority``: 1 lowest .. 5 highest; 0 counts as 3); an empty
    ``run_id``: not kept in line (admitted by whoever asks while a slot is free)."""

    queue: str
    holder: str
    concurrency: int | None
    rate_per_second: float | None
    priority: int = 3
    run_id: str = ""
    call_id: str = ""


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class QueuePlace:
    """Where an execution's activity call waits in a cluster queue's line (``queue_place``)."""

    queue: str
    priority: int
    ahead: int
    """Live waiters that go before it (higher priority, or the same one waiting longer)."""


# ---------------------------------------------------------------- events, streams, attributes


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class OutputWrite:
    """One thing a workflow publishes: an event's new value or an item appended to a stream."""

    kind: str
    """``event`` (a key's value; the latest wins) or ``stream`` (an item appended)."""
    name: str
    """The event's key or the stream's name."""
    value: str
    """JSON."""


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class OutputRecord:
    """An event or stream item as stored."""

    seq: int
    """Its place among everything the execution published, from 1 (``read_outputs`` follows
    it)."""
    kind: str
    name: str
    offset: int
    """A stream item's place in its stream, from 0; an event's: how many values its key had
    before."""
    value: str
    at: float
    call_id: str | None = None
    """The publish step that wrote it (None: written before schema v21/v26 by a step the
    upgrade could not tell; a fork does not carry it over)."""


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class SearchAttribute:
    """A typed, indexed attribute of an execution (``sw.set_search_attributes``)."""

    name: str
    kind: str
    """``str``, ``int``, ``float``, ``bool`` or ``datetime``."""
    text: str | None = None
    """The value of a ``str`` attribute."""
    number: float | None = None
    """The value of the others: ints and floats as they are, bools 0/1, datetimes as epoch
    seconds."""


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class AttributeFilter:
    """One condition of a listing on a search attribute: ``name op value``."""

    name: str
    op: str = "="
    """``=``, ``<``, ``<=``, ``>`` or ``>=``."""
    text: str | None = None
    """Compared with ``str`` attributes."""
    number: float | None = None
    """Compared with the numeric ones (both given: either may match, for ``=`` only)."""


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Publication:
    """What one durable publishing call writes, in one transaction with its step."""

    step: StepRecord
    outputs: tuple[OutputWrite, ...] = ()
    attributes: tuple[SearchAttribute, ...] = ()
