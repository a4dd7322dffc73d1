"""Batch operations' records: which workflows (``WorkflowFilter``), what to do with them
(``BatchAction``), and what became of each (``BatchOutcome``, ``BatchItem``, ``BatchReport``).

``Manager.batch`` (and ``batch_cancel``, ``batch_terminate``, ``batch_retry``,
``batch_signal``) runs an action on every current workflow a filter selects, one ordinary
single-key operator call at a time; see docs/batch.md. These records hold no behaviour but
checking and summing, so the sync client and the command line share them.
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypedDict

from sagaway.states import ENDED, WorkflowStatus

LIVE = frozenset(WorkflowStatus) - ENDED
"""PENDING, RUNNING, WAITING, SUSPENDED: what cancel, terminate and signal select by default."""


class BatchAction(enum.StrEnum):
    """What a batch does to each workflow it selects."""

    CANCEL = "cancel"
    """Ask it to cancel: it compensates and ends CANCELLED (``Manager.cancel``)."""
    TERMINATE = "terminate"
    """End it at once as TERMINATED, without compensating (``Manager.terminate``)."""
    RETRY = "retry"
    """Make a SUSPENDED workflow due now (``Manager.retry``)."""
    SIGNAL = "signal"
    """Send it a signal (``Manager.signal(name).send``)."""

    @property
    def default_statuses(self) -> frozenset[WorkflowStatus]:
        """The statuses selected when the filter names none: SUSPENDED for a retry, the live
        ones for the others."""
        return frozenset({WorkflowStatus.SUSPENDED}) if self is BatchAction.RETRY else LIVE


class BatchOutcome(enum.StrEnum):
    """What became of one selected workflow (in a dry run: what would)."""

    DONE = "done"
    """The action was applied (a dry run: would be)."""
    ALREADY_ENDED = "already_ended"
    """It had ended when it was listed (the filter selected ended statuses)."""
    ALREADY_REQUESTED = "already_requested"
    """A cancel had been asked before (by this batch run earlier, or by someone else)."""
    ALREADY_SENT = "already_sent"
    """This signal's ``dedupe_id`` had been sent to it before."""
    NOT_SUSPENDED = "not_suspended"
    """A retry of a workflow that was not SUSPENDED when listed."""
    RACED = "raced"
    """It changed between the listing and the call: it ended (or, for a retry, left
    SUSPENDED) meanwhile."""
    NOT_FOUND = "not_found"
    """It was gone by the time of the call (purged meanwhile)."""
    FAILED = "failed"
    """The call failed; ``BatchItem.detail`` says why."""


@dataclasses.dataclass(frozen=True, slots=True)
class WorkflowFilter:
    """Which current workflows a batch selects: every field given must match.

    ``statuses`` empty means the action's default (``BatchAction.default_statuses``); names
    are accepted (``{"SUSPENDED"}``). ``since`` is inclusive and ``until`` exclusive, both
    creation times in epoch seconds. ``code_versions``: only workflows created by these code
    versions (``None`` in it: unversioned ones). ``where``: only workflows whose search
    attributes match every one of these filters, written as ``sagaway list --where`` reads
    them (``customer=4711``, ``amount>=100``, ``vip=true``, ``customer="4711"`` for the string
    only; docs/search-attributes.md); a mapping of names to values is read as equalities
    (``{"customer": "4711"}`` matches that string only; a number or bool also matches a string
    attribute that reads the same, as a ``--where`` text does).
    """

    name: str | None = None
    statuses: frozenset[WorkflowStatus] = frozenset()
    key_prefix: str = ""
    since: float | None = None
    until: float | None = None
    code_versions: frozenset[str | None] = frozenset()
    where: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        raw: Any = self.statuses
        if isinstance(raw, str):
            raise TypeError("statuses must be a collection of statuses, not one string")
        known = {s.value for s in WorkflowStatus}
        names = [str(s).upper() for s in raw]
        unknown = sorted(n for n in names if n not in known)
        if unknown:
            raise ValueError(
                f"unknown status {', '.join(unknown)}; the statuses are {', '.join(sorted(known))}"
            )
        object.__setattr__(self, "statuses", frozenset(WorkflowStatus(n) for n in names))
        object.__setattr__(self, "code_versions", frozenset(self.code_versions))
        object.__setattr__(self, "where", where_texts(self.where))
        for field in ("since", "until"):
            value = getattr(self, field)
            if value is not None and (isinstance(value, bool) or not math.isfinite(value)):
                raise ValueError(f"{field} must be a finite number of epoch seconds")
        if self.since is not None and self.until is not None and self.since >= self.until:
            raise ValueError("since must be before until")
        if self.name is not None and not self.name:
            raise ValueError("name must not be empty (None: any name)")

    @property
    def empty(self) -> bool:
        """True when nothing narrows it (every workflow in the action's default statuses)."""
        return self == WorkflowFilter()

    def effective_statuses(self, action: BatchAction) -> frozenset[WorkflowStatus]:
        """The statuses it selects for ``action``."""
        return self.statuses or action.default_statuses

    def to_json(self) -> dict[str, Any]:
        """The fields given, as JSON values (in reports and ``--json`` output)."""
        data: dict[str, Any] = {}
        if self.name is not None:
            data["name"] = self.name
        if self.statuses:
            data["statuses"] = sorted(s.value for s in self.statuses)
        if self.key_prefix:
            data["key_prefix"] = self.key_prefix
        for field in ("since", "until"):
            if getattr(self, field) is not None:
                data[field] = getattr(self, field)
        if self.code_versions:
            data["code_versions"] = sorted(self.code_versions, key=lambda v: (v is None, v or ""))
        if self.where:
            data["where"] = list(self.where)
        return data

    def describe(self) -> str:
        """One line for people: ``name=order, status=RUNNING, key prefix 'eu-'``."""
        parts = [f"{k}={v}" for k, v in self.to_json().items()]
        return ", ".join(parts) if parts else "no filter"


def where_texts(where: object) -> tuple[str, ...]:
    """``WorkflowFilter.where`` as filter texts: a text is kept (checked when the batch lists),
    a mapping's ``name: value`` becomes the equality of the value's type."""
    if isinstance(where, str):
        return (where,)
    if isinstance(where, Mapping):
        return tuple(f"{name}={_literal(name, value)}" for name, value in where.items())
    if not isinstance(where, Iterable):
        raise TypeError(f"where must be filter texts or a mapping, not {type(where).__name__}")
    texts: tuple[object, ...] = tuple(where)
    bad = [t for t in texts if not isinstance(t, str) or not t.strip()]
    if bad:
        raise TypeError(f"where holds filter texts such as 'customer=4711', not {bad[0]!r}")
    return tuple(str(t) for t in texts)


def _literal(name: object, value: object) -> str:
    """How a filter text writes ``value`` (a string quoted: that string only)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float) and math.isfinite(value):
        return repr(value)
    if isinstance(value, datetime.datetime) and value.tzinfo is not None:
        return value.isoformat()
    if isinstance(value, str):
        return f'"{value}"'  # quoted: the string, not a number that reads the same
    raise TypeError(
        f"search attribute {name!r}: filter by a str, int, float, bool or aware datetime, "
        f"not {value!r}"
    )


@dataclasses.dataclass(frozen=True, slots=True)
class BatchItem:
    """One selected workflow: as listed (``status``), and what became of it."""

    key: str
    run_id: str
    workflow: str
    status: WorkflowStatus
    outcome: BatchOutcome
    detail: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "run_id": self.run_id,
            "workflow": self.workflow,
            "status": self.status.value,
            "outcome": self.outcome.value,
            "detail": self.detail,
        }


@dataclasses.dataclass(frozen=True, slots=True)
class BatchReport:
    """What a batch did (``dry_run``: would do) to each workflow its filter selected."""

    action: BatchAction
    filter: WorkflowFilter
    dry_run: bool
    items: tuple[BatchItem, ...]
    started_at: float
    ended_at: float

    @property
    def matched(self) -> int:
        """How many workflows the filter selected."""
        return len(self.items)

    @property
    def done(self) -> list[BatchItem]:
        """Those the action was applied to (a dry run: would be)."""
        return [i for i in self.items if i.outcome is BatchOutcome.DONE]

    @property
    def refused(self) -> list[BatchItem]:
        """Those it was not applied to, each with its outcome saying why."""
        return [i for i in self.items if i.outcome is not BatchOutcome.DONE]

    @property
    def failed(self) -> list[BatchItem]:
        """Those whose call failed (an error, not a state that refuses the action)."""
        return [i for i in self.items if i.outcome is BatchOutcome.FAILED]

    def counts(self) -> dict[BatchOutcome, int]:
        """How many items had each outcome (every outcome present, zeros included)."""
        return count_outcomes(self.items)

    def to_json(self) -> dict[str, Any]:
        """The whole report as JSON values (``sagaway batch ... --json``)."""
        return {
            "action": self.action.value,
            "filter": self.filter.to_json(),
            "dry_run": self.dry_run,
            "matched": self.matched,
            "counts": {o.value: n for o, n in self.counts().items()},
            "started_at": self.started_at,
            "ended_at": self.ended_at,
            "items": [i.to_json() for i in self.items],
        }


class BatchOptions(TypedDict, total=False):
    """The keyword options of ``Manager.batch`` (for the sync client, which passes them on)."""

    reason: str | None
    signal: str | None
    payload: Any
    dedupe_id: str | None
    rate: float | None
    page_size: int
    dry_run: bool
    on_item: Callable[[BatchItem], None] | None


def count_outcomes(items: Iterable[BatchItem]) -> dict[BatchOutcome, int]:
    """How many of ``items`` had each outcome, every outcome present."""
    counts = dict.fromkeys(BatchOutcome, 0)
    for item in items:
        counts[item.outcome] += 1
    return counts


def check_pacing(rate: float | None, page_size: int) -> None:
    """``ValueError`` for a rate that is not a positive number, or a page size below 1."""
    if rate is not None and (isinstance(rate, bool) or not math.isfinite(rate) or rate <= 0):
        raise ValueError(f"rate must be a positive number of calls per second, not {rate!r}")
    if isinstance(page_size, bool) or not isinstance(page_size, int) or not 1 <= page_size <= 1000:
        raise ValueError(f"page_size must be an integer from 1 to 1000, not {page_size!r}")
