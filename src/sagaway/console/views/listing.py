"""The workflow list: counts per status, filters, keyset pages, newest first."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response

import sagaway as sw
from sagaway.console.filters import FilterError, ListFilters
from sagaway.console.rendering import render
from sagaway.console.views._common import manager_of


async def list_page(request: Request) -> Response:
    return await _listing(request, "list.html")


async def list_fragment(request: Request) -> Response:
    """The live part of the list page, fetched again every few seconds."""
    return await _listing(request, "_list_live.html")


async def _listing(request: Request, template: str) -> Response:
    manager = await manager_of(request)
    counts = await manager.count_workflows()
    context: dict[str, Any] = {
        "counts": [(s, counts.get(s, 0)) for s in sw.WorkflowStatus],
        "total": sum(counts.values()),
        "rows": [],
        "next_query": None,
        "error": None,
    }
    try:
        filters = ListFilters.from_query(
            request.query_params, request.query_params.getlist("status")
        )
    except FilterError as exc:
        return render(
            request, template, {**context, "filters": ListFilters(), "error": str(exc)}, 400
        )
    context["filters"] = filters
    try:
        since, until = filters.bounds()
        rows = await manager.list_workflows(
            status=list(filters.statuses) or None,
            name=filters.name or None,
            key_prefix=filters.key_prefix or None,
            code_versions=filters.code_versions(),
            since=since,
            until=until,
            after=filters.after or None,
            where=filters.attribute_filters(),
            limit=filters.limit + 1,  # one more: is there a next page?
        )
    except ValueError as exc:  # a filter, or a cursor that is not one
        return render(request, template, {**context, "error": str(exc)}, 400)
    if len(rows) > filters.limit:
        rows = rows[: filters.limit]
        context["next_query"] = filters.query(after=rows[-1].cursor)
    context["rows"] = rows
    return render(request, template, context)
