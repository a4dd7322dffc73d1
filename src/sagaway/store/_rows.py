"""Row <-> record conversion shared by the SQL stores.

Rows are read by column name (``sqlite3.Row``, psycopg's ``dict_row``), never by position: a
query may select more columns, or in another order, without shifting a field.

A row holding a value this version cannot read (changed by hand, or written by a newer version)
raises ``CorruptRecord`` naming the row, the column and the value, for that row only: the stores
skip such rows in listings and counts (logging each) so one bad row never stops the rest.
"""

from __future__ import annotations

import dataclasses
import enum
import logging
import operator
import sqlite3
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol, TypeVar

from sagaway import errors
from sagaway.states import StepKind, StepStatus, WorkflowStatus
from sagaway.store.records import SignalRecord, StepRecord, WorkflowRecord


class Row(Protocol):
    """A row whose columns are read by name."""

    def __getitem__(self, column: str, /) -> Any: ...


logger = logging.getLogger(__name__)

E = TypeVar("E", bound=enum.Enum)

_REPAIR = "repair the row (or delete it), or run the Sagaway version that wrote it"


def _enum(cls: type[E], row: Row, field: str, what: Callable[[Row], str]) -> E:
    """``cls(row[field])``, or ``CorruptRecord`` naming the row (``what(row)``: built only
    then, as this runs for every row read)."""
    value = row[field]
    try:
        return cls(value)
    except ValueError:
        raise errors.CorruptRecord(what(row), field, value, _REPAIR) from None


def _workflow_label(row: Row) -> str:
    return f"workflow {row['key']!r} (run {row['run_id']})"


def _step_label(row: Row) -> str:
    return f"step {row['call_id']} of run {row['run_id']}"


R = TypeVar("R")


_COLUMNS: dict[tuple[type[Any], frozenset[str], tuple[str, ...]], tuple[str, ...]] = {}


def _columns(cls: type[Any], leave: frozenset[str], read: tuple[str, ...]) -> tuple[str, ...]:
    """The fields of ``cls`` but those left and read (remembered: this runs for every row)."""
    names = _COLUMNS.get((cls, leave, read))
    if names is None:
        skip = leave | set(read)
        names = tuple(f.name for f in dataclasses.fields(cls) if f.name not in skip)
        _COLUMNS[cls, leave, read] = names
    return names


def from_columns(cls: type[R], row: Row, *, leave: frozenset[str] = frozenset(), **read: Any) -> R:
    """The record ``cls`` from the columns of ``row`` named as its fields, as they are, but
    for the fields ``read`` gives (converted, checked) and those it ``leave``s to their
    defaults (no such column)."""
    names = _columns(cls, leave, tuple(read))
    return cls(**dict(zip(names, _values(row, names), strict=True)), **read)


_PLACES: dict[tuple[tuple[str, ...], tuple[str, ...]], Callable[[Any], tuple[Any, ...]]] = {}


def _values(row: Row, names: tuple[str, ...]) -> tuple[Any, ...]:
    """The values of ``row``'s columns ``names``, in that order, by a getter made once per
    query shape. A ``sqlite3.Row`` finds a column by name by comparing it with every column's
    name in turn, so its columns are read by position (found from its column names)."""
    columns = tuple(row.keys()) if isinstance(row, sqlite3.Row) else ()  # (): read by name
    shape = (columns, names)
    getter = _PLACES.get(shape)
    if getter is None:
        places = [columns.index(name) for name in names] if columns else list(names)
        getter = _PLACES[shape] = _getter(places)
    return getter(row)


def _getter(places: list[Any]) -> Callable[[Any], tuple[Any, ...]]:
    """``row -> (row[p] for p in places)`` as a tuple, however many places."""
    if len(places) == 1:
        one = operator.itemgetter(places[0])
        return lambda row: (one(row),)
    return operator.itemgetter(*places)


def workflow_from_row(row: Row) -> WorkflowRecord:
    """A ``WorkflowRecord`` from the columns run_id .. concurrency_key of a workflows row."""
    status = _enum(WorkflowStatus, row, "status", _workflow_label)
    return from_columns(WorkflowRecord, row, leave=_CLAIM_ONLY, status=status)


_CLAIM_ONLY = frozenset({"previous_owner"})
"""A workflow field no workflows column holds (a claim's answer)."""


def claimed_from_row(row: Row) -> WorkflowRecord:
    """``workflow_from_row`` of a claimed row, with the ``previous_owner`` the claim returned."""
    record = workflow_from_row(row)
    if row["previous_owner"] is None:
        return record
    return dataclasses.replace(record, previous_owner=row["previous_owner"])


def readable_workflows(rows: Iterable[Row]) -> list[WorkflowRecord]:
    """The records of ``rows``, without (and logging) those this version cannot read."""
    records = []
    for row in rows:
        try:
            records.append(workflow_from_row(row))
        except errors.CorruptRecord as exc:
            report(exc)
    return records


def readable_counts(rows: Iterable[Sequence[Any]]) -> dict[WorkflowStatus, int]:
    """``count_by_status`` rows (status, count) as a dict, without (and logging) unknown
    statuses."""
    counts: dict[WorkflowStatus, int] = {}
    for status, count in rows:
        try:
            counts[WorkflowStatus(status)] = int(count)
        except ValueError:
            report(errors.CorruptRecord(f"{count} workflow(s)", "status", status, _REPAIR))
    return counts


def report(exc: errors.CorruptRecord) -> None:
    logger.error("skipped an unreadable row: %s", exc, extra={"action": "corrupt_record"})


def step_from_row(row: Row) -> StepRecord:
    """A ``StepRecord`` from the columns run_id .. ended_at of a steps row."""
    kind = _enum(StepKind, row, "kind", _step_label)
    status = _enum(StepStatus, row, "status", _step_label)
    return from_columns(StepRecord, row, kind=kind, status=status)


def signal_from_row(row: Row) -> SignalRecord:
    """A ``SignalRecord`` from the columns of ``list_signals``."""
    return from_columns(SignalRecord, row)
