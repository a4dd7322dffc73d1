"""The login page: paste a token of the console once, get a session cookie (a new random
session for each login, revoked at logout: ``sessions.Sessions``). The session is the token's
principal's, with its roles as the tokens file gives them at each request."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from sagaway.console.rendering import render
from sagaway.console.security import (
    SESSION_COOKIE,
    Wait,
    check_token,
    checked_form,
    known,
    safe_next,
)
from sagaway.console.sessions import Sessions


async def login_page(request: Request) -> Response:
    target = safe_next(request.query_params.get("next"))
    return render(request, "login.html", {"next": target, "error": None})


async def login(request: Request) -> Response:
    form = await checked_form(request)
    given = form.get("token")
    target = safe_next(str(form.get("next") or "/"))
    if known(request) is None:
        return RedirectResponse(target, status_code=303)
    checked = await check_token(request, given.strip() if isinstance(given, str) else "")
    if isinstance(checked, Wait):
        page = render(request, "login.html", {"next": target, "error": checked.message}, 429)
        page.headers["Retry-After"] = str(checked.seconds)
        return page
    if checked is None:
        return render(request, "login.html", {"next": target, "error": "wrong token"}, 401)
    sessions: Sessions = request.app.state.sessions
    sessions.close(request.cookies.get(SESSION_COOKIE, ""))  # a login never keeps an old id
    response = RedirectResponse(target, status_code=303)
    response.set_cookie(
        SESSION_COOKIE,
        sessions.open(checked),
        max_age=int(sessions.lifetime),
        httponly=True,
        samesite="strict",
        path="/",
    )
    return response


async def logout(request: Request) -> Response:
    await checked_form(request)
    sessions: Sessions = request.app.state.sessions
    sessions.close(request.cookies.get(SESSION_COOKIE, ""))
    response = RedirectResponse("/login", status_code=303)
    response.delete_cookie(SESSION_COOKIE, httponly=True, samesite="strict", path="/")
    return response
