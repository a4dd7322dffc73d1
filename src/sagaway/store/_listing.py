"""The query of a listing page (``Store.list_page``), composed for the filters given.

A page is the newest current executions first, ``(created_at DESC, run_id)``, paged by keyset.
One fixed query with every filter optional (``:status IS NULL OR …``) would be planned once for
all of them, and a planner that cannot see which filters are set walks the whole history for a
rare status or name. So the text is composed from fixed fragments for the filters actually
given (values are always bound parameters, never spliced in):

* no status: one ordered walk, of the ``created_at`` index, or of the name index with a name;
* statuses: one branch for the live ones (few rows: the live index, then a sort) and one per
  ended status, each reading its own index in page order; the branches, each cut at the page
  size, are merged and cut again.

The status lists below repeat the partial indexes' conditions word for word: SQLite uses a
partial index only when the query states its condition as written.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

from sagaway.states import WorkflowStatus
from sagaway.store import _attributes
from sagaway.store._params import version_filter
from sagaway.store.records import ListQuery

COLUMNS = (
    "run_id, key, name, args, args_hash, status, result, error, parent_key, created_at, "
    "updated_at, ended_at, lease_owner, lease_expires_at, next_run_at, suspend_count, "
    "key_space, cancel_reason, deadline_at, trace_context, code_version, concurrency_key, "
    "ordering_key, ordering_seq, debounce_key, "
    "priority, fairness_key, fairness_weight, fair_pass"
)
LIVE_CONDITION = "status IN ('PENDING', 'RUNNING', 'WAITING', 'SUSPENDED')"
"""The condition of the index ``workflows_live``."""
ENDED_CONDITION = "status IN ('COMPLETED', 'FAILED', 'CANCELLED', 'TERMINATED')"
"""The status condition of the index ``workflows_ended_by_status``."""
_ORDER = "ORDER BY created_at DESC, run_id"


@dataclasses.dataclass(frozen=True, slots=True)
class Dialect:
    """What differs between the SQL of the two stores."""

    current: str
    """The condition that a row is its key's current execution."""
    key_prefix: str
    """The condition that ``key`` starts with the parameter ``key_prefix``."""
    versions: str
    """The condition on ``code_version`` (parameters of ``_params.version_filter``)."""
    param: Callable[[str], str]
    """The placeholder of a named parameter."""
    arrays: bool
    """Whether array parameters are lists (PostgreSQL) rather than JSON text (SQLite)."""
    no_limit: int | None
    """The ``LIMIT`` of a page without one (a negative ``ListQuery.limit``)."""
    driver_join: str = "JOIN"
    """How a driving search attribute filter joins the executions (``_attributes.plan``)."""


SQLITE = Dialect(
    current="is_current = 1",
    key_prefix="substr(key, 1, length(:key_prefix)) = :key_prefix",
    versions=(
        "(code_version IN (SELECT value FROM json_each(:versions))"
        " OR (:unversioned AND code_version IS NULL))"
    ),
    param=lambda name: f":{name}",
    arrays=False,
    no_limit=-1,
    driver_join="CROSS JOIN",
)
POSTGRES = Dialect(
    current="is_current",
    key_prefix="left(key, length(%(key_prefix)s)) = %(key_prefix)s",
    versions=(
        "(code_version = ANY(%(versions)s::text[]) OR (%(unversioned)s AND code_version IS NULL))"
    ),
    param=lambda name: f"%({name})s",
    arrays=True,
    no_limit=None,  # LIMIT NULL: all rows
)


def page_query(dialect: Dialect, query: ListQuery) -> tuple[str, dict[str, Any]]:
    """The SQL text and parameters of one listing page."""
    p = dialect.param
    params = _page_params(query, dialect)
    common = [
        dialect.current,
        f"created_at >= {p('since')}",
        f"created_at < {p('until')}",
        f"created_at <= {p('after_at')}",
        f"(created_at < {p('after_at')} OR run_id > {p('after_run')})",
    ]
    if query.name is not None:
        common.append(f"name = {p('name')}")
    if query.key_prefix:
        common.append(dialect.key_prefix)
    if query.code_versions:
        common.append(dialect.versions)
    for field in ("ordering_key", "debounce_key", "priority", "fairness_key"):
        if getattr(query, field) is not None:
            common.append(f"{field} = {p(field)}")
    source, order, conditions = _attributes.plan(
        query.attributes, p, params, join=dialect.driver_join
    )
    common.extend(conditions)
    branches = _status_branches(query.statuses, p, params)
    selects = [
        f"SELECT {COLUMNS} FROM {source} WHERE {' AND '.join([*common, *extra])} "
        f"{order or _ORDER} LIMIT {p('limit')}"
        for extra in branches
    ]
    if len(selects) == 1:
        return selects[0], params
    merged = " UNION ALL ".join(
        f"SELECT * FROM ({select}) AS b{i}" for i, select in enumerate(selects)
    )
    return f"SELECT * FROM ({merged}) AS page {_ORDER} LIMIT {p('limit')}", params


def _page_params(query: ListQuery, dialect: Dialect) -> dict[str, Any]:
    """The parameters every page binds. Keyset paging: the next page starts after the last row
    shown; bounds not given are infinities rather than NULL, so every condition on
    ``created_at`` stays usable by its index."""
    after_at, after_run = query.after if query.after is not None else (math.inf, "")
    return {
        "since": -math.inf if query.since is None else query.since,
        "until": math.inf if query.until is None else query.until,
        "after_at": after_at,
        "after_run": after_run,
        "name": query.name,
        "key_prefix": query.key_prefix,
        "ordering_key": query.ordering_key,
        "debounce_key": query.debounce_key,
        "priority": query.priority,
        "fairness_key": query.fairness_key,
        "limit": query.limit if query.limit >= 0 else dialect.no_limit,
        **version_filter(query.code_versions or None, arrays=dialect.arrays),
    }


def _status_branches(
    statuses: frozenset[WorkflowStatus], p: Callable[[str], str], params: dict[str, Any]
) -> list[list[str]]:
    """The extra conditions of each branch of the page (see the module docstring); adds the
    status parameters to ``params``."""
    if not statuses:
        return [[]]
    wanted = sorted(statuses)
    branches: list[list[str]] = []
    live = [s.value for s in wanted if not s.ended]
    if live:
        names = [f"live_status_{i}" for i in range(len(live))]
        params.update(zip(names, live, strict=True))
        listed = ", ".join(p(name) for name in names)
        branches.append([LIVE_CONDITION, f"status IN ({listed})"])
    for i, status in enumerate(s.value for s in wanted if s.ended):
        params[f"ended_status_{i}"] = status
        branches.append([ENDED_CONDITION, f"status = {p(f'ended_status_{i}')}"])
    return branches
