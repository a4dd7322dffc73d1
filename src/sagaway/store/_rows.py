"""Row <-> record conversion shared by the SQL stores (both select columns in the same order).

A row holding a value this version cannot read (changed by hand, or written by a newer version)
raises ``CorruptRecord`` naming the row, the column and the value, for that row only: the stores
skip such rows in listings and counts (logging each) so one bad row never stops the rest.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Iterable, Sequence
from typing import Any, TypeVar

from sagaway import errors
from sagaway.states import StepKind, StepStatus, WorkflowStatus
from sagaway.store.records import StepRecord, WorkflowRecord

logger = logging.getLogger(__name__)

E = TypeVar("E", bound=enum.Enum)

_REPAIR = "repair the row (or delete it), or run the Sagaway version that wrote it"


def _enum(cls: type[E], value: Any, what: str, field: str) -> E:
    try:
        return cls(value)
    except ValueError:
        raise errors.CorruptRecord(what, field, value, _REPAIR) from None


def workflow_from_row(row: Sequence[Any]) -> WorkflowRecord:
    """A ``WorkflowRecord`` from the columns run_id .. key_space of the named queries."""
    return WorkflowRecord(
        run_id=row[0],
        key=row[1],
        name=row[2],
        args=row[3],
        args_hash=row[4],
        status=_enum(WorkflowStatus, row[5], f"workflow {row[1]!r} (run {row[0]})", "status"),
        result=row[6],
        error=row[7],
        parent_key=row[8],
        created_at=row[9],
        updated_at=row[10],
        ended_at=row[11],
        lease_owner=row[12],
        lease_expires_at=row[13],
        next_run_at=row[14],
        suspend_count=row[15],
        key_space=row[16],
    )


def readable_workflows(rows: Iterable[Sequence[Any]]) -> list[WorkflowRecord]:
    """The records of ``rows``, without (and logging) those this version cannot read."""
    records = []
    for row in rows:
        try:
            records.append(workflow_from_row(row))
        except errors.CorruptRecord as exc:
            report(exc)
    return records


def readable_counts(rows: Iterable[Sequence[Any]]) -> dict[WorkflowStatus, int]:
    """``count_by_status`` rows as a dict, without (and logging) unknown statuses."""
    counts: dict[WorkflowStatus, int] = {}
    for status, count in rows:
        try:
            counts[WorkflowStatus(status)] = int(count)
        except ValueError:
            report(errors.CorruptRecord(f"{count} workflow(s)", "status", status, _REPAIR))
    return counts


def report(exc: errors.CorruptRecord) -> None:
    logger.error("skipped an unreadable row: %s", exc, extra={"action": "corrupt_record"})


def step_from_row(row: Sequence[Any]) -> StepRecord:
    what = f"step {row[1]} of run {row[0]}"
    return StepRecord(
        run_id=row[0],
        call_id=row[1],
        kind=_enum(StepKind, row[2], what, "kind"),
        name=row[3],
        status=_enum(StepStatus, row[4], what, "status"),
        attempts=row[5],
        result=row[6],
        error=row[7],
        started_at=row[8],
        ended_at=row[9],
    )
