"""The login page: paste the console's token once, get a session cookie."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from sagaway.console.rendering import render
from sagaway.console.security import SESSION_COOKIE, checked_form, safe_next, same, session_value


async def login_page(request: Request) -> Response:
    target = safe_next(request.query_params.get("next"))
    return render(request, "login.html", {"next": target, "error": None})


async def login(request: Request) -> Response:
    form = await checked_form(request)
    token = request.app.state.config.token
    given = form.get("token")
    target = safe_next(str(form.get("next") or "/"))
    if token is None:
        return RedirectResponse(target, status_code=303)
    if not isinstance(given, str) or not same(given.strip(), token):
        return render(request, "login.html", {"next": target, "error": "wrong token"}, 401)
    response = RedirectResponse(target, status_code=303)
    response.set_cookie(
        SESSION_COOKIE, session_value(token), httponly=True, samesite="strict", path="/"
    )
    return response


async def logout(request: Request) -> Response:
    await checked_form(request)
    response = RedirectResponse("/login", status_code=303)
    response.delete_cookie(SESSION_COOKIE, httponly=True, samesite="strict", path="/")
    return response
