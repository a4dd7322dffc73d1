"""The persistence contract, in domain verbs. The engine reaches storage only through it.

Every method is one database transaction. Methods that take a lease ``token`` are *fenced*: they
write only while that token still owns a RUNNING execution, and raise ``errors.LeaseLost``
otherwise, so a process that lost its lease (paused, partitioned, or its workflow was
cancelled) can never overwrite the work of the new owner. Verbs that take ``audit`` (an
operator's action) write that entry of the audit trail in the same transaction, and only when
they change something (see ``_audit``): the entry and the change commit or roll back together.
The records the verbs take and return are defined in ``records`` and re-exported here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection
from typing import TYPE_CHECKING, Protocol

from sagaway import errors
from sagaway.states import WorkflowStatus
from sagaway.store.output_verbs import OutputVerbs
from sagaway.store.pause_verbs import PauseVerbs
from sagaway.store.records import *  # noqa: F403  (the contract's records, re-exported)
from sagaway.store.records import (
    AttemptErrorRecord,
    AuditNote,
    AuditQuery,
    AuditRecord,
    CancelRequestRecord,
    ForkRequest,
    Lease,
    ListQuery,
    NewWorkflow,
    QueueAdmission,
    QueuePlace,
    ScheduleFire,
    SchedulePause,
    SchedulePut,
    ScheduleRecord,
    SignalReceive,
    SignalRecord,
    StepRecord,
    WorkflowRecord,
)

if TYPE_CHECKING:  # only ``listen`` names them: a store opened to read never loads them
    from sagaway.store import notices


@dataclasses.dataclass(frozen=True, slots=True)
class CreateResult:
    record: WorkflowRecord
    """The current execution under the key: the new one, or the one that was there."""
    created: bool
    replaced_run_id: str | None = None
    """The live execution that was terminated to make room (replace_live=True)."""


class StoreUnavailable(errors.EngineUnavailable):
    """The database cannot be reached now (server down, network cut, no connection in time).

    Transient: the same call may succeed later. A client call rides through it for a while
    (``_engine.outages``), then raises ``EngineUnavailable``; a workflow run that meets it is
    doomed (it must not go on as if the call had an answer) and resumes from its last record.
    """


class DatabaseNotFound(errors.SagawayError):
    """No Sagaway database is at this URL (opened with ``create=False``, which creates nothing:
    no SQLite file or directory, no PostgreSQL schema)."""

    def __init__(self, url: str, detail: str = "") -> None:
        super().__init__(f"no Sagaway database at {url}" + (f" ({detail})" if detail else ""))
        self.url = url


class PermissionDenied(errors.SagawayError):
    """The Engine Server refused this call: the roles of the caller's token (or certificate)
    do not allow it. The message names the principal, the call and the role it needs."""


class CancelPending(errors.SagawayError):
    """``finish_workflow`` refused to end an execution COMPLETED: a cancel request it had not
    seen (``cancel_seen=False``) is recorded on it. The owner still holds it: it delivers the
    cancellation at its end and ends it CANCELLED instead."""

    def __init__(self, run_id: str, reason: str) -> None:
        super().__init__(reason)
        self.run_id = run_id
        self.reason = reason


class QueueLimitVerbs(Protocol):
    """The verbs of cluster queue limits (schema v14/v12)."""

    async def acquire_queue_slot(
        self, admission: QueueAdmission, *, expires_at: float, now: float
    ) -> float | None:
        """Admit one activity attempt of ``admission.queue`` under limits every process
        shares: take one of ``concurrency`` slots for ``holder`` until ``expires_at`` (slots
        expired by ``now`` are freed first) and the next start of ``rate_per_second`` (starts
        ``1/rate`` apart).

        None if admitted (also when ``holder`` already holds a live slot); otherwise nothing is
        taken and the answer is the earliest time to try again: when the next start is allowed,
        or ``now`` when only a release (or the call ahead) can let it in. A call refused is kept
        in line (``run_id``, ``call_id``) until ``expires_at`` or its admission: while a live
        waiter of a higher priority, or of the same one waiting longer, is in line, a free slot
        or start is not given to another call.
        """
        ...

    async def renew_queue_slot(
        self, queue: str, *, holder: str, expires_at: float, now: float
    ) -> bool:
        """Push a live slot's expiry to ``expires_at``; False if ``holder`` holds none now."""
        ...

    async def release_queue_slot(self, queue: str, *, holder: str, now: float) -> None:
        """Free ``holder``'s slot of ``queue`` (no-op if it holds none), and make the execution
        WAITING for a slot of it (``waiting_for`` ``queue:<queue>``) due at ``now``: the first
        waiter's, else the highest priority's, longest waiting."""
        ...

    async def leave_queue(self, queue: str, *, run_id: str, call_id: str, now: float) -> None:
        """Take a call that stopped waiting (cancelled) out of ``queue``'s line (no-op if it
        is not in it), and wake the first waiter as ``release_queue_slot`` does."""
        ...


class ScheduleVerbs(Protocol):
    """The verbs of schedules (schema v13/v11)."""

    async def put_schedule(
        self, put: SchedulePut, *, now: float, audit: AuditNote | None = None
    ) -> ScheduleRecord:
        """Create the schedule ``put.schedule.id`` or replace its definition; returns it as
        stored.

        An update keeps the stored ``next_tick_at`` when the cron expression and time zone are
        unchanged (ticks missed meanwhile stay due for catch-up) unless it resumes a paused
        schedule; ``keep_paused`` leaves the stored ``paused`` as it is.
        """
        ...

    async def list_schedules(self) -> list[ScheduleRecord]:
        """Every schedule, by id."""
        ...

    async def set_schedule_paused(
        self, change: SchedulePause, *, now: float, audit: AuditNote | None = None
    ) -> ScheduleRecord | None:
        """Pause or resume a schedule (None: no such id). Resuming a paused one sets its next
        tick to ``change.next_tick_at``: the ticks of a pause are not caught up."""
        ...

    async def delete_schedule(self, schedule_id: str, *, audit: AuditNote | None = None) -> bool:
        """Delete a schedule (its executions stay); False if there is none."""
        ...

    async def fire_schedule(self, fire: ScheduleFire, *, now: float) -> bool:
        """In one transaction: advance the unpaused schedule's ``next_tick_at`` from
        ``fire.tick_at`` to ``fire.next_tick_at`` only if it still is ``tick_at``
        (compare-and-set), and if so create ``fire.starts`` PENDING (a key already taken is
        left as it is). True: this call won."""
        ...


class AuditVerbs(Protocol):
    """The verbs of the audit trail (schema v18/v22)."""

    async def record_audit(self, note: AuditNote, *, target: str | None = None) -> None:
        """Write an entry of an action that is no single transaction of its own (a purge, made
        of many): about ``target`` (None: about no one workflow)."""
        ...

    async def list_audit(self, query: AuditQuery) -> list[AuditRecord]:
        """Entries of the audit trail matching ``query``, newest first; they outlive the
        workflows they are about (a purge leaves them)."""
        ...


class Store(QueueLimitVerbs, ScheduleVerbs, AuditVerbs, PauseVerbs, OutputVerbs, Protocol):
    """Durable storage of workflow executions and their steps."""

    url: str
    """Where the data lives (without credentials)."""

    async def open(self) -> None:
        """Connect and migrate the schema to the latest version."""
        ...

    async def close(self) -> None: ...

    async def server_time(self) -> float | None:
        """The database server's clock (epoch seconds), or None when it shares ours (SQLite)."""
        ...

    async def listen(
        self, callback: notices.Callback, *, owner: str | None = None, ends: bool = True
    ) -> None:
        """Call ``callback(notice)`` when another process changes something worth a look
        (``store.notices``: an execution ``Ended``, work ``Ready``, a ``CancelRequested``,
        ``SchedulesChanged``); and ``Listening()`` once notices flow (again: anything sent
        while they did not was lost), ``Deaf()`` when they stop.

        A store may address notices: without ``ends`` only the ends and cancel requests of what
        ``owner`` holds need come; a later call with ``ends`` asks for everyone's. A store that
        passes those on a stream of their own says whether they flow with
        ``Listening("ends")`` and ``Deaf("ends")``; one that says neither sends them with the
        rest.

        Optional speed-up: backends without notifications do nothing, and polling finds it all.
        """

    async def create_workflow(
        self,
        new: NewWorkflow,
        *,
        now: float,
        lease: Lease | None,
        replace_live: bool,
        audit: AuditNote | None = None,
    ) -> CreateResult:
        """Insert an execution under ``new.key`` unless the key is taken (``audit``: when it
        was created).

        With a lease the execution starts RUNNING, owned by it; otherwise PENDING. When the key is
        taken by a live execution and ``replace_live`` is true, that one is TERMINATED first.

        With ``new.ordering_key`` it takes the next place in the key's line
        (``ordering_seq``), and ``claim_due`` starts it only when no execution of the key that
        has not ended has an earlier place. With ``new.debounce_key`` (never with a lease): if
        the key is free and an execution of ``new.name`` with that debounce key is PENDING,
        that one takes ``new.args`` and is postponed to ``now + new.debounce`` (at most its
        burst's first start + ``debounce_max_wait``) and is returned (not created), and
        ``new.key`` is recorded as joined to it; a later start under ``new.key`` returns it.
        Otherwise the execution is created PENDING, due at ``now + new.debounce``.
        """
        ...

    async def fork_workflow(
        self, fork: ForkRequest, *, now: float, audit: AuditNote | None = None
    ) -> CreateResult | None:
        """Create a PENDING execution ``fork.run_id`` under ``fork.key`` (no parent) with the
        name, arguments and queue of the ended execution ``fork.source_run_id``, and copies of
        its steps ``fork.call_ids``, in one transaction (a worker may take it at once). Its
        ``code_version`` is the one given (the forking process's), not the source's.
        What the kept publish steps published is copied too, in the same transaction: their
        events and stream items (numbered again in the source's order: ``seq`` from 1, each
        stream's and event key's offsets from 0) and the search attributes they set (the
        latest of each name). ``fork.payloads``, when given, replace the copied arguments, the
        copied results and errors of the steps they name, and the copied values they name by
        source ``seq``, in the same transaction (a codec's payloads re-sealed for the new run).

        Returns the new execution (``created``), or the one holding ``key`` (not created), or
        None when ``source_run_id`` is not an ended execution, or when a kept step started a
        child that has no execution (a purge took it): the fork would read an end that is gone.
        A child found is kept from a purge until the fork is committed, after which the fork's
        step names it for the purge.
        """
        ...

    async def get_workflow(self, key: str) -> WorkflowRecord | None:
        """The current execution under ``key``."""
        ...

    async def get_run(self, run_id: str) -> WorkflowRecord | None: ...

    async def list_workflows(
        self, *, status: WorkflowStatus | None, limit: int
    ) -> list[WorkflowRecord]:
        """Current executions, newest first."""
        ...

    async def load_steps(self, run_id: str) -> list[StepRecord]: ...

    async def load_steps_many(self, run_ids: Collection[str]) -> dict[str, list[StepRecord]]:
        """``load_steps`` of several executions in one read (those without steps are absent)."""
        ...

    async def record_step(self, step: StepRecord, *, token: str) -> None:
        """Insert or replace the outcome of one durable call (fenced)."""
        ...

    async def finish_workflow(
        self,
        run_id: str,
        *,
        token: str,
        status: WorkflowStatus,
        result: str | None,
        error: str | None,
        now: float,
        final_step: StepRecord | None = None,
        has_parent: bool = True,
        cancel_seen: bool = False,
    ) -> None:
        """End an owned execution as COMPLETED, FAILED or CANCELLED (fenced).

        A COMPLETED end is refused with ``CancelPending`` if a cancel request is recorded on
        the execution and ``cancel_seen`` is False (the run never saw one): checked in the
        statement that ends it, so every request ``request_cancel`` accepts is delivered.

        ``final_step``, if given, is recorded in the same transaction. Every workflow waiting
        for it as a child (its parent, and any other that attached to it under its key) becomes
        due in the same transaction. ``has_parent=False`` (a top-level workflow, whose end only
        rarely has a waiter) lets a store take a faster path, such as ending it in a batch.
        """
        ...

    async def suspend_workflow(
        self, run_id: str, *, token: str, error: str, now: float, next_run_at: float
    ) -> None:
        """Stop an owned execution as SUSPENDED until ``next_run_at`` (fenced)."""
        ...

    async def release_workflow(self, run_id: str, *, token: str, now: float) -> None:
        """Give up ownership so another worker takes it at once (graceful shutdown)."""
        ...

    async def renew_leases(self, tokens: Collection[str], *, expires_at: float) -> set[str]:
        """Extend leases to ``expires_at`` (one that already holds longer keeps its expiry:
        a renewal delayed on its way may arrive after a later one); returns the tokens that
        are still owned."""
        ...

    async def claim_due(
        self,
        *,
        owner: str,
        now: float,
        lease_timeout: float,
        limit: int,
        exclude: Collection[str],
        queues: Collection[str] | None = None,
        versions: Collection[str | None] | None = None,
    ) -> list[tuple[WorkflowRecord, Lease]]:
        """Take ownership of executions that should run now (of ``queues``; None: any queue),
        created by one of the code ``versions`` (None: any version; None in it: unversioned
        executions, ``WorkflowRecord.code_version`` None).

        Due are: PENDING or RUNNING executions whose lease is absent or expired (a crashed
        owner), and SUSPENDED or WAITING ones whose ``next_run_at`` has come. Taken in this
        order: the due work of started executions by ``next_run_at``; then PENDING starts by
        priority (higher first) and fair pass (``WorkflowRecord.fair_pass``: in order of
        arrival within a fairness key), then ``next_run_at``.
        """
        ...

    async def next_due(
        self,
        *,
        owner: str,
        queues: Collection[str] | None = None,
        versions: Collection[str | None] | None = None,
    ) -> float | None:
        """The earliest time an execution of ``queues`` and ``versions`` (as in ``claim_due``)
        not owned by ``owner`` may become due."""
        ...

    async def end_workflow(
        self,
        run_id: str,
        *,
        status: WorkflowStatus,
        error: str | None,
        now: float,
        audit: AuditNote | None = None,
    ) -> bool:
        """End a live execution by request (CANCELLED, TERMINATED); False if already ended."""
        ...

    async def request_cancel(
        self, run_id: str, *, reason: str, now: float, audit: AuditNote | None = None
    ) -> bool:
        """Record a cancel request on a live execution (the first reason stays) and make it
        due at once if no process holds it; False if it has ended."""
        ...

    async def cancel_requests(self, run_ids: Collection[str]) -> dict[str, str]:
        """The cancel reasons recorded on those of ``run_ids`` that have one."""
        ...

    async def list_cancel_requests(self, run_id: str) -> list[CancelRequestRecord]:
        """Every cancel request made to ``run_id`` (``request_cancel``), accepted or not, in
        the order they came; they go with the execution when it is purged."""
        ...

    async def retry_now(self, run_id: str, *, now: float, audit: AuditNote | None = None) -> bool:
        """Make a SUSPENDED execution due at once; False if it is not suspended."""
        ...

    async def count_by_status(self) -> dict[WorkflowStatus, int]: ...

    # ------------------------------------------------------------ durable waits (schema v2)

    async def send_signal(
        self,
        key: str,
        *,
        name: str,
        payload: str,
        dedupe_id: str | None,
        now: float,
        run_id: str | None = None,
        audit: AuditNote | None = None,
    ) -> tuple[WorkflowRecord | None, bool]:
        """Store a signal for the current execution under ``key`` unless it has ended, and,
        with ``run_id``, only if that is the current execution (a payload sealed for that run:
        otherwise nothing is stored and the current one is returned).

        Returns the execution (None: no such key) and whether the signal was stored (False when
        the execution has ended or the dedupe_id was seen before). An execution WAITING for this
        signal becomes due at once. A retry after a lost acknowledgement reports True if the
        lost attempt stored it, even if the execution has ended since.
        """
        ...

    async def receive_signal(
        self, receive: SignalReceive, *, accept: Callable[[str], str | None], now: float
    ) -> str | None:
        """Consume the oldest undelivered signal ``name`` of an owned execution (fenced).

        ``accept(payload)`` returns None for a well-formed payload, else why it is not; rejected
        signals are marked with the reason (kept, never delivered). A delivered signal is recorded
        as the COMPLETED step ``call_id`` in the same transaction. With none to deliver and
        ``wait``, the step is recorded WAITING (``ended_at`` = deadline) and the execution becomes
        WAITING until a signal arrives or ``deadline``, its lease released.
        """
        ...

    async def wait_workflow(
        self,
        run_id: str,
        *,
        token: str,
        waiting_for: str,
        next_run_at: float | None,
        step: StepRecord | None,
        now: float,
    ) -> None:
        """Make an owned execution WAITING until ``next_run_at`` (fenced), recording ``step``."""
        ...

    async def wait_for_child(
        self, run_id: str, *, token: str, child_key: str, wait: bool, now: float
    ) -> WorkflowRecord | None:
        """The child execution under ``child_key``; if it has not ended and ``wait``, the owned
        parent becomes WAITING until the child ends (its end makes the parent due)."""
        ...

    async def list_signals(self, run_id: str) -> list[SignalRecord]: ...

    # ------------------------------------------------------------ retention (schema v9/v7)

    async def purge_ended(
        self, *, before: float, statuses: Collection[WorkflowStatus] | None, limit: int
    ) -> list[str]:
        """Delete up to ``limit`` ended executions (of ``statuses``; None: every ended status)
        whose ``ended_at`` is before ``before``, oldest first, with their steps and signals;
        returns their run ids. Short transactions: one on PostgreSQL, writer jobs of a few
        dozen rows on SQLite (where the workers' commits share the one writer).

        Current executions and terminated predecessors alike; never a live one (``ValueError``
        if ``statuses`` names one), nor a child whose parent is live. Rows another purger holds
        are skipped, so fewer than ``limit`` does not mean none are left to someone else.
        """
        ...

    async def count_purgeable(
        self, *, before: float, statuses: Collection[WorkflowStatus] | None
    ) -> int:
        """How many executions ``purge_ended`` would delete, batches aside (a dry run)."""
        ...

    # ------------------------------------------------------------ inspection (operators' reads)

    async def list_page(self, query: ListQuery) -> list[WorkflowRecord]:
        """Current executions matching ``query``, newest first (``created_at`` descending, then
        ``run_id``), at most ``query.limit``; ``query.after`` continues a listing after the
        (created_at, run_id) of the last row of the previous page."""
        ...

    async def list_attempt_errors(self, run_id: str) -> list[AttemptErrorRecord]:
        """The error of each failed attempt of the steps of an execution (the last 20 attempts
        of each step), by call and attempt. Kept by the database itself: a step row holds the
        error of its latest attempt, and writing the step again for a later attempt (or without
        an error) keeps the error it held, so recording a step costs no second write."""
        ...

    async def start_place(self, run_id: str, *, now: float) -> int | None:
        """How many due PENDING starts a claim takes before the execution ``run_id`` while it
        waits PENDING (0: it is next among the starts; the due work of started executions
        goes before every start); None when it is not PENDING. Read only."""
        ...

    async def queue_place(self, run_id: str, *, now: float) -> QueuePlace | None:
        """Where a call of ``run_id`` waits in a cluster queue's line (its earliest, if
        several); None when none does. Read only."""
        ...
