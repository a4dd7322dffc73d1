"""What both SQL stores share to answer the operator's reads of the errors of every attempt
of a step (listing pages: ``_listing``)."""

from __future__ import annotations

from sagaway.store._rows import Row
from sagaway.store.records import AttemptErrorRecord


def attempt_error_from_row(row: Row) -> AttemptErrorRecord:
    """An ``AttemptErrorRecord`` from a row of ``list_attempt_errors``."""
    return AttemptErrorRecord(
        call_id=row["call_id"], attempt=row["attempt"], error=row["error"], at=row["at"]
    )
