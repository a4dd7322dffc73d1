"""One workflow's page: status, input, result or error, step timeline, signals, relations,
search attributes and outputs (a page of them: ``?outputs=N``, see ``console.outputs``)."""

from __future__ import annotations

import time

from starlette.requests import Request
from starlette.responses import Response

from sagaway.console import outputs, timeline
from sagaway.console.rendering import render
from sagaway.console.views._common import manager_of


async def workflow_page(request: Request) -> Response:
    return await _workflow(request, "workflow.html")


async def workflow_fragment(request: Request) -> Response:
    """The live part of the workflow page, fetched again every few seconds."""
    return await _workflow(request, "_workflow_live.html")


async def _workflow(request: Request, template: str) -> Response:
    key = request.path_params["key"]
    manager = await manager_of(request)
    handle = manager.get_workflow(key)
    d = await handle.describe()  # WorkflowNotFound: the 404 page
    now = time.time()
    start = outputs.page_start(request.query_params)
    context = {
        "d": d,
        "timeline": timeline.build(d, now),
        "now": now,
        "outputs": await outputs.shown(handle, start),
        "outputs_query": f"?outputs={start}" if start else "",
    }
    return render(request, template, context)
