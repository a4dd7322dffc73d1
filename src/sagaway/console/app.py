"""The console's ASGI app: routes, the security middleware, and the error pages."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

import sagaway as sw
from sagaway import codecs
from sagaway.console.backend import UNAVAILABLE, Backend
from sagaway.console.config import ConsoleConfig
from sagaway.console.rendering import render
from sagaway.console.security import Guard
from sagaway.console.sessions import LoginThrottle, Sessions
from sagaway.console.views import actions, auth, batches, listing, metrics, pauses, workflow
from sagaway.principals import ALL_ROLES, Principal, local_actor
from sagaway.store import PermissionDenied

STATIC = Path(__file__).parent / "static"


def create_app(
    config: ConsoleConfig,
    *,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> Starlette:
    """The console for ``config``; it opens its Manager on the first request. ``clock`` and
    ``sleep`` time its sessions and the back-off of failed logins (tests pass fakes)."""
    backend = Backend(config.url, codecs.reader(config.codec_keys))

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            await backend.close()

    routes = [
        Route("/", listing.list_page),
        Route("/fragments/list", listing.list_fragment),
        Route("/workflows/{key:path}", workflow.workflow_page),
        Route("/fragments/workflow/{key:path}", workflow.workflow_fragment),
        Route("/actions/{action}/{key:path}", actions.confirm_page, methods=["GET"]),
        Route("/actions/{action}/{key:path}", actions.perform, methods=["POST"]),
        Route("/batch/{action}", batches.confirm_page, methods=["GET"]),
        Route("/batch/{action}", batches.perform, methods=["POST"]),
        Route("/paused", pauses.paused_page, methods=["GET"]),
        Route("/paused", pauses.perform, methods=["POST"]),
        Route("/login", auth.login_page, methods=["GET"]),
        Route("/login", auth.login, methods=["POST"]),
        Route("/logout", auth.logout, methods=["POST"]),
        Route("/metrics", metrics.metrics_page),
        Mount("/static", StaticFiles(directory=STATIC), name="static"),
    ]
    handlers = {
        HTTPException: _http_error,
        sw.WorkflowNotFound: _not_found,
        PermissionDenied: _denied,
        **dict.fromkeys(UNAVAILABLE, _unavailable),
    }
    app = Starlette(
        routes=routes,
        middleware=[Middleware(Guard, config=config)],
        exception_handlers=handlers,
        lifespan=lifespan,
    )
    app.state.config = config
    app.state.credentials = config.load_credentials()  # TokensFileError: not served
    # Who acts through a console without tokens (it answers this machine only).
    app.state.local_principal = Principal(local_actor(), ALL_ROLES)
    app.state.backend = backend
    app.state.sessions = Sessions(
        idle=config.session_idle, lifetime=config.session_lifetime, clock=clock
    )
    app.state.throttle = LoginThrottle(clock=clock, sleep=sleep)
    return app


def _error_page(request: Request, status: int, title: str, detail: str) -> Response:
    return render(
        request, "error.html", {"status": status, "title": title, "detail": detail}, status
    )


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    titles = {403: "Forbidden", 404: "Not found", 405: "Method not allowed"}
    return _error_page(request, exc.status_code, titles.get(exc.status_code, "Error"), exc.detail)


async def _not_found(request: Request, exc: Exception) -> Response:
    return _error_page(request, 404, "No such workflow", str(exc))


def reload_credentials(app: Starlette) -> str:
    """Read the tokens file again (SIGHUP): its entries apply from the next request on, to
    sessions too (a removed token's sessions end). On an error the previous ones stay
    (``TokensFileError``). A one-line summary of what is in force."""
    found = app.state.config.load_credentials()
    app.state.credentials = found
    return found.summary() if found is not None else "no token"


async def _denied(request: Request, exc: Exception) -> Response:
    # The Engine Server refused the console's own token (its roles), not the user's.
    return _error_page(
        request,
        403,
        "Refused by the Engine Server",
        f"{exc} (the console's token for the server, $SAGAWAY_TOKEN, needs that role)",
    )


async def _unavailable(request: Request, exc: Exception) -> Response:
    detail = f"{type(exc).__name__}: {exc}".replace(request.app.state.config.url, "the database")
    return _error_page(
        request,
        503,
        "Database unavailable",
        f"The console cannot reach its database now ({detail}). It keeps running and tries "
        "again on the next request.",
    )
