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
from collections.abc import Iterable, Sequence
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


def _enum(cls: type[E], value: Any, what: str, field: str) -> E:
    try:
        return cls(value)
    except ValueError:
        raise errors.CorruptRecord(what, field, value, _REPAIR) from None


def workflow_from_row(row: Row) -> WorkflowRecord:
    """A ``WorkflowRecord`` from the columns run_id .. concurrency_key of a workflows row."""
    run_id, key = row["run_id"], row["key"]
    return WorkflowRecord(
        run_id=run_id,
        key=key,
        name=row["name"],
        args=row["args"],
        args_hash=row["args_hash"],
        status=_enum(WorkflowStatus, row["status"], f"workflow {key!r} (run {run_id})", "status"),
        result=row["result"],
        error=row["error"],
        parent_key=row["parent_key"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        ended_at=row["ended_at"],
        lease_owner=row["lease_owner"],
        lease_expires_at=row["lease_expires_at"],
        next_run_at=row["next_run_at"],
        suspend_count=row["suspend_count"],
        key_space=row["key_space"],
        cancel_reason=row["cancel_reason"],
        deadline_at=row["deadline_at"],
        trace_context=row["trace_context"],
        code_version=row["code_version"],
        concurrency_key=row["concurrency_key"],
    )


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
    run_id, call_id = row["run_id"], row["call_id"]
    what = f"step {call_id} of run {run_id}"
    return StepRecord(
        run_id=run_id,
        call_id=call_id,
        kind=_enum(StepKind, row["kind"], what, "kind"),
        name=row["name"],
        status=_enum(StepStatus, row["status"], what, "status"),
        attempts=row["attempts"],
        result=row["result"],
        error=row["error"],
        started_at=row["started_at"],
        ended_at=row["ended_at"],
    )


def signal_from_row(row: Row) -> SignalRecord:
    """A ``SignalRecord`` from the columns of ``list_signals``."""
    return SignalRecord(
        id=row["id"],
        name=row["name"],
        payload=row["payload"],
        dedupe_id=row["dedupe_id"],
        created_at=row["created_at"],
        consumed_call=row["consumed_call"],
        consumed_at=row["consumed_at"],
        rejected=row["rejected"],
    )
