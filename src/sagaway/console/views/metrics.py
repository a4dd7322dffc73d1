"""``/metrics``: the Prometheus metrics of the console's process, with the status gauge read
from the database at each scrape (behind the console's token, like every page)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response

from sagaway.console.views._common import manager_of


async def metrics_page(request: Request) -> Response:
    try:
        from sagaway.telemetry import metrics
    except ImportError as exc:
        return PlainTextResponse(str(exc) + "\n", status_code=501)
    metrics.enable_metrics()  # the first scrape turns counting on (it is off by default)
    await metrics.refresh_statuses(await manager_of(request))
    body, content_type = metrics.exposition()
    return Response(body, media_type=content_type)
