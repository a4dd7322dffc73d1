"""What both SQL stores share to answer the operator's reads: listing pages and the errors
of every attempt of a step.

A listing is ordered newest first, by ``(created_at DESC, run_id)``, and paged by keyset: the
next page starts after the last row shown, so rows created meanwhile never shift a page and no
row is shown twice or skipped. Bounds that are not given are passed as infinities rather than
NULL, which keeps every condition on ``created_at`` usable by its index.
"""

from __future__ import annotations

import json
import math
from typing import Any

from sagaway.store._params import version_filter
from sagaway.store._rows import Row
from sagaway.store.records import AttemptErrorRecord, ListQuery


def page_params(query: ListQuery, *, arrays: bool) -> dict[str, Any]:
    """The parameters of the ``list_page`` query; ``arrays``: pass the statuses as a list
    (PostgreSQL) rather than as a JSON array (SQLite)."""
    statuses = sorted(s.value for s in query.statuses)
    after_at, after_run = query.after if query.after is not None else (math.inf, "")
    return {
        "since": -math.inf if query.since is None else query.since,
        "until": math.inf if query.until is None else query.until,
        "after_at": after_at,
        "after_run": after_run,
        "any_status": not statuses,
        "statuses": statuses if arrays else json.dumps(statuses),
        "name": query.name,
        "key_prefix": query.key_prefix,
        "limit": query.limit,
        **version_filter(query.code_versions or None, arrays=arrays),
    }


def attempt_error_from_row(row: Row) -> AttemptErrorRecord:
    """An ``AttemptErrorRecord`` from a row of ``list_attempt_errors``."""
    return AttemptErrorRecord(
        call_id=row["call_id"], attempt=row["attempt"], error=row["error"], at=row["at"]
    )
