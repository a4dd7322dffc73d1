"""What the handlers share: the Manager of the app, and the URL of a workflow's page."""

from __future__ import annotations

from starlette.requests import Request

import sagaway as sw
from sagaway.console.backend import Backend
from sagaway.console.rendering import key_url


async def manager_of(request: Request) -> sw.Manager:
    backend: Backend = request.app.state.backend
    return await backend.manager()


def workflow_path(key: str) -> str:
    return f"/workflows/{key_url(key)}"
