"""The Manager's batch operations: cancel, terminate, retry or signal every workflow a
``WorkflowFilter`` selects.

A batch is a loop over ordinary single-key operator calls, so it holds no lock and no long
transaction: it lists the selected workflows a page at a time (keyset pages, newest first,
each page one short query), then makes one call per workflow, one after the other, at most
``rate`` calls a second (100 by default). Workers keep running meanwhile; at most one of the
batch's calls is in flight at any time. Each call is audited with the batch's ``reason`` as a
single call is.

Running the same batch again does no harm: a workflow whose cancel was asked is reported
``already_requested``, one that ended is no longer selected (or ``already_ended``), a signal's
``dedupe_id`` is sent once per workflow (``already_sent``).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import AsyncIterator, Callable
from typing import Any, TypedDict, Unpack

from sagaway import errors, search
from sagaway._engine.engine import Engine, EngineRef
from sagaway.batches import (
    BatchAction,
    BatchItem,
    BatchOutcome,
    BatchReport,
    WorkflowFilter,
    check_pacing,
)
from sagaway.clock import Clock
from sagaway.manager.operator_calls import OperatorCalls
from sagaway.signals import Signal
from sagaway.states import ENDED, WorkflowStatus
from sagaway.store.records import AttributeFilter, ListQuery, WorkflowRecord

DEFAULT_PAGE = 100
"""Workflows listed per page: one short query each."""
DEFAULT_RATE = 100.0
"""Calls a second unless told otherwise: on SQLite, where every process's writes share one
writer, an unpaced batch took about 60% of the workers' throughput while it ran; at this rate,
under 10% (docs/batch.md, "Measured")."""

Outcome = tuple[BatchOutcome, str | None]


class BatchPacing(TypedDict, total=False):
    """The options of ``BatchCalls.batch`` every batch takes, which the one-action shorthands
    (``batch_cancel`` ...) pass on as they are: ``rate`` (calls a second, ``DEFAULT_RATE``
    unless given), ``page_size`` (``DEFAULT_PAGE``), ``dry_run`` and ``on_item``."""

    rate: float | None
    page_size: int
    dry_run: bool
    on_item: Callable[[BatchItem], None] | None


def signal_dedupe_id(name: str, payload: Any) -> str:
    """The ``dedupe_id`` of a batch signal given none: the same for the same name and payload,
    so a batch run again sends nothing twice (pass your own to send the same payload again)."""
    text = json.dumps([name, payload], sort_keys=True, separators=(",", ":"), default=str)
    return "batch-" + hashlib.sha256(text.encode()).hexdigest()[:24]


class _Pacer:
    """At most ``rate`` calls a second on ``clock`` (None: as fast as the calls go)."""

    def __init__(self, clock: Clock, rate: float | None) -> None:
        self._clock = clock
        self._gap = 0.0 if rate is None else 1.0 / rate
        self._next: float | None = None

    async def wait(self) -> None:
        if self._gap == 0.0:
            await asyncio.sleep(0)  # let the process's own workers run between calls
            return
        now = self._clock.now()
        if self._next is not None and self._next > now:
            await self._clock.sleep(self._next - now)
            now = self._clock.now()
        self._next = max(self._next or now, now) + self._gap


class BatchCalls:
    """Batch operations on the engine the Manager has open (``ref``)."""

    def __init__(self, ref: EngineRef, operators: OperatorCalls) -> None:
        self._ref = ref
        self._operators = operators

    async def batch(
        self,
        action: BatchAction | str,
        filter: WorkflowFilter,
        *,
        reason: str | None = None,
        signal: str | None = None,
        payload: Any = None,
        dedupe_id: str | None = None,
        rate: float | None = DEFAULT_RATE,
        page_size: int = DEFAULT_PAGE,
        dry_run: bool = False,
        on_item: Callable[[BatchItem], None] | None = None,
    ) -> BatchReport:
        """Apply ``action`` (cancel, terminate, retry, signal) to every current workflow
        ``filter`` selects, one single-key call at a time; a ``BatchReport`` says what became
        of each. See docs/batch.md.

        Args:
            reason: why; the cancel or terminate reason, and the audit trail's reason.
            signal, payload, dedupe_id: the signal to send (``action="signal"`` only);
                ``dedupe_id`` defaults to one derived from the name and payload, so the same
                batch run twice sends nothing twice.
            rate: at most this many calls a second (None: one after the other, unpaced).
            page_size: workflows listed per query (1 to 1000).
            dry_run: change nothing; report what would be done and what refused.
            on_item: called with each item as soon as it is done (a progress bar).

        Raises:
            ValueError: a bad option (a signal without its name, a rate of 0, a search
                attribute filter that does not read, ...).
            EngineUnavailable: the database or Engine Server stopped answering; what was done
                stays done, and running the batch again carries on.
        """
        action = BatchAction(action)
        check_pacing(rate, page_size)
        if not isinstance(filter, WorkflowFilter):
            raise TypeError(f"filter must be a WorkflowFilter, not {type(filter).__name__}")
        apply = self._action(action, reason, signal, payload, dedupe_id)
        attributes = search.filters(list(filter.where))  # ValueError: before anything is done
        engine = self._ref.require()
        started = engine.clock.now()
        pacer = _Pacer(engine.clock, rate)
        items: list[BatchItem] = []
        async for record in _selected(engine, action, filter, attributes, page_size):
            outcome, detail = _precheck(action, record)
            if outcome is BatchOutcome.DONE and not dry_run:
                await pacer.wait()
                outcome, detail = await _attempt(
                    engine, record, apply, action is BatchAction.SIGNAL
                )
            item = BatchItem(record.key, record.run_id, record.name, record.status, outcome, detail)
            items.append(item)
            if on_item is not None:
                on_item(item)
        return BatchReport(action, filter, dry_run, tuple(items), started, engine.clock.now())

    async def batch_cancel(
        self,
        filter: WorkflowFilter,
        *,
        reason: str = "cancelled by a batch",
        **pacing: Unpack[BatchPacing],
    ) -> BatchReport:
        """``batch("cancel", filter, ...)``: each selected live workflow compensates and ends
        CANCELLED (cooperatively, as ``Manager.cancel``)."""
        return await self.batch(BatchAction.CANCEL, filter, reason=reason, **pacing)

    async def batch_terminate(
        self,
        filter: WorkflowFilter,
        *,
        reason: str = "terminated by a batch",
        **pacing: Unpack[BatchPacing],
    ) -> BatchReport:
        """``batch("terminate", filter, ...)``: each selected live workflow ends TERMINATED at
        once, without compensating."""
        return await self.batch(BatchAction.TERMINATE, filter, reason=reason, **pacing)

    async def batch_retry(
        self, filter: WorkflowFilter, *, reason: str | None = None, **pacing: Unpack[BatchPacing]
    ) -> BatchReport:
        """``batch("retry", filter, ...)``: each selected SUSPENDED workflow becomes due now."""
        return await self.batch(BatchAction.RETRY, filter, reason=reason, **pacing)

    async def batch_signal(
        self,
        filter: WorkflowFilter,
        name: str,
        payload: Any = None,
        *,
        dedupe_id: str | None = None,
        reason: str | None = None,
        **pacing: Unpack[BatchPacing],
    ) -> BatchReport:
        """``batch("signal", filter, signal=name, payload=...)``: send the signal ``name`` to
        each selected live workflow, once per ``dedupe_id``."""
        return await self.batch(
            BatchAction.SIGNAL,
            filter,
            signal=name,
            payload=payload,
            dedupe_id=dedupe_id,
            reason=reason,
            **pacing,
        )

    def _action(
        self,
        action: BatchAction,
        reason: str | None,
        signal: str | None,
        payload: Any,
        dedupe_id: str | None,
    ) -> Callable[[str], Any]:
        """The single-key call ``action`` makes, checked before anything is listed."""
        if (signal is not None) != (action is BatchAction.SIGNAL):
            raise ValueError("a signal batch needs signal=NAME; other actions take none")
        if action is not BatchAction.SIGNAL and (payload is not None or dedupe_id is not None):
            raise ValueError("payload and dedupe_id are for signal batches only")
        if reason is not None and not isinstance(reason, str):
            raise TypeError(f"reason must be a string, not {type(reason).__name__}")
        ops = self._operators
        if action is BatchAction.CANCEL:
            text = reason or "cancelled by a batch"
            return lambda key: ops.cancel(key, text)
        if action is BatchAction.TERMINATE:
            text = reason or "terminated by a batch"
            return lambda key: ops.terminate(key, text)
        if action is BatchAction.RETRY:
            return lambda key: ops.retry(key, reason=reason)
        assert signal is not None
        sender = Signal(self._ref, signal)
        once = dedupe_id or signal_dedupe_id(signal, payload)
        return lambda key: sender.send(key, payload, dedupe_id=once, reason=reason)


async def _selected(
    engine: Engine,
    action: BatchAction,
    filter: WorkflowFilter,
    attributes: tuple[AttributeFilter, ...],
    page_size: int,
) -> AsyncIterator[WorkflowRecord]:
    """The current workflows ``filter`` selects for ``action``, a keyset page at a time
    (newest first; workflows created after the first page was read are not selected). Its
    search attribute filters (``attributes``) drive the page query from the attributes' index
    ``(name, value, created_at, run_id)``: a page costs about its own rows."""
    after: tuple[float, str] | None = None
    while True:
        query = ListQuery(
            limit=page_size,
            statuses=filter.effective_statuses(action),
            name=filter.name,
            key_prefix=filter.key_prefix,
            since=filter.since,
            until=filter.until,
            after=after,
            code_versions=filter.code_versions,
            attributes=attributes,
        )
        page = await engine.list_page(query)
        for record in page:
            yield record
        if len(page) < page_size:
            return
        after = (page[-1].created_at, page[-1].run_id)


def _precheck(action: BatchAction, record: WorkflowRecord) -> Outcome:
    """What the listing alone says (a dry run stops here): DONE when the call is worth making."""
    if record.status in ENDED:
        return BatchOutcome.ALREADY_ENDED, f"it is {record.status.value}"
    if action is BatchAction.RETRY and record.status is not WorkflowStatus.SUSPENDED:
        return BatchOutcome.NOT_SUSPENDED, f"it is {record.status.value}"
    if action is BatchAction.CANCEL and record.cancel_reason is not None:
        return BatchOutcome.ALREADY_REQUESTED, record.cancel_reason
    return BatchOutcome.DONE, None


async def _attempt(
    engine: Engine, record: WorkflowRecord, apply: Callable[[str], Any], signal: bool
) -> Outcome:
    """Make the call on ``record.key``; the outcome it had (``signal``: False from the call
    means the dedupe id was sent before, not that the workflow changed meanwhile).

    The key is looked up first: a call is made only on the execution that was listed, not on
    a new one started under its key since (nor on one that has ended meanwhile)."""
    try:
        current = await engine.get(record.key)
        if current.run_id != record.run_id:
            return BatchOutcome.RACED, f"a new execution ({current.run_id}) since it was listed"
        if current.status in ENDED:
            return BatchOutcome.RACED, f"ended {current.status.value} since it was listed"
        changed = await apply(record.key)
    except errors.WorkflowNotFound:
        return BatchOutcome.NOT_FOUND, "gone (purged) since it was listed"
    except (errors.EngineUnavailable, errors.PayloadError):
        raise  # the next call would fail the same way: stop, and say why
    except errors.SagawayError as exc:
        status = await _status(engine, record.key)
        if status is not None and status in ENDED:
            return BatchOutcome.RACED, f"ended {status.value} since it was listed"
        return BatchOutcome.FAILED, str(exc) or type(exc).__name__
    if changed:
        return BatchOutcome.DONE, None
    if signal:
        return BatchOutcome.ALREADY_SENT, "this dedupe_id was sent to it before"
    status = await _status(engine, record.key)
    shown = "gone" if status is None else status.value
    return BatchOutcome.RACED, f"{shown} since it was listed"


async def _status(engine: Engine, key: str) -> WorkflowStatus | None:
    try:
        return (await engine.get(key)).status
    except errors.WorkflowNotFound:
        return None
