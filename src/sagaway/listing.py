"""Operators' listings: workflows by filters, and the audit trail (``Manager.list_workflows``,
``Manager.audit_log``; ``sagaway list`` and ``sagaway audit`` print them)."""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING, TypedDict, Unpack

from sagaway import search
from sagaway._engine import audit
from sagaway._engine.audit import AuditEntry
from sagaway.descriptions import WorkflowDescription, describe, parse_cursor
from sagaway.states import WorkflowStatus, statuses_named
from sagaway.store._params import PRIORITIES
from sagaway.store.base import Store
from sagaway.store.records import AuditQuery, ListQuery

if TYPE_CHECKING:
    from sagaway._engine.engine import Engine


class ListFilter(TypedDict, total=False):
    """What ``Manager.list_workflows`` (and ``sagaway list``) take: which workflows, and how
    many. Each is optional: none given, the newest ``limit`` (default 100) of every status.
    Their meanings: ``ClientCalls.list_workflows``."""

    status: str | Collection[str] | None
    limit: int
    name: str | None
    key_prefix: str | None
    since: float | None
    until: float | None
    after: str | None
    code_versions: Collection[str | None] | None
    where: search.Where | None
    ordering_key: str | None
    debounce_key: str | None
    priority: int | None
    fairness_key: str | None


_FILTERS = ListFilter.__optional_keys__
DEFAULT_LIMIT = 100


async def list_workflows(store: Store, **filters: Unpack[ListFilter]) -> list[WorkflowDescription]:
    """See ``Manager.list_workflows`` (which reads its engine's store; ``sagaway list`` reads
    a store it opened itself: ``reading``)."""
    unknown = sorted(set(filters) - _FILTERS)
    if unknown:
        raise TypeError(f"list_workflows() got an unexpected keyword argument {unknown[0]!r}")
    limit = filters.get("limit", DEFAULT_LIMIT)
    status = statuses_named(filters.get("status"))  # "FAILED" as well as WorkflowStatus.FAILED
    attributes = search.filters(filters.get("where"))
    priority, fairness_key = filters.get("priority"), filters.get("fairness_key")
    _check_flow_filters(priority, fairness_key)
    narrowed = {n for n, v in filters.items() if v is not None} - {"status", "limit", "where"}
    if not narrowed and not attributes and (status is None or isinstance(status, WorkflowStatus)):
        records = await store.list_workflows(status=status, limit=limit)
    else:
        statuses = [status] if isinstance(status, WorkflowStatus) else list(status or ())
        after = filters.get("after")
        query = ListQuery(
            limit=limit,
            statuses=frozenset(statuses),
            name=filters.get("name"),
            key_prefix=filters.get("key_prefix") or "",
            since=filters.get("since"),
            until=filters.get("until"),
            after=None if after is None else parse_cursor(after),
            code_versions=frozenset(filters.get("code_versions") or ()),
            attributes=attributes,
            ordering_key=filters.get("ordering_key"),
            debounce_key=filters.get("debounce_key"),
            priority=priority,
            fairness_key=fairness_key,
        )
        records = await store.list_page(query)
    # One more read per page: which of the live ones an operator paused.
    live = [r.run_id for r in records if not r.status.ended]
    paused = await store.paused_runs(live) if live else set()
    return [describe(r, [], paused=r.run_id in paused) for r in records]


def _check_flow_filters(priority: int | None, fairness_key: str | None) -> None:
    """``ValueError`` for a priority that is no level, a fairness key that is no string."""
    if priority is not None and (
        isinstance(priority, bool) or not isinstance(priority, int) or priority not in PRIORITIES
    ):
        raise ValueError(
            f"priority must be an int from {PRIORITIES[0]} to {PRIORITIES[-1]}, not {priority!r}"
        )
    if fairness_key is not None and not isinstance(fairness_key, str):
        raise ValueError(f"fairness_key must be a string, not {type(fairness_key).__name__}")


async def audit_log(
    engine: Engine,
    *,
    key: str | None,
    run_id: str | None,
    actor: str | None,
    action: str | Collection[str] | None,
    since: float | None,
    until: float | None,
    limit: int,
    before: int | None,
) -> list[AuditEntry]:
    """See ``Manager.audit_log``."""
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise ValueError(f"limit must be an integer >= 1, not {limit!r}")
    actions = frozenset([action] if isinstance(action, str) else action or ())
    unknown = sorted(actions - audit.ACTIONS)
    if unknown:
        raise ValueError(
            f"unknown audit action {', '.join(map(repr, unknown))}; the actions are "
            f"{', '.join(sorted(audit.ACTIONS))}"
        )
    query = AuditQuery(
        limit=limit,
        before_seq=before,
        run_id=run_id,
        target=key,
        actor=actor,
        actions=actions,
        since=since,
        until=until,
    )
    return [audit.entry(r) for r in await engine.store.list_audit(query)]
