"""Who may use the console, and which requests may change something.

- Token: when the console has tokens (its single token, a tokens file's), every request needs
  one, as ``Authorization: Bearer TOKEN`` or as the session cookie the login page sets (a
  random session id, new at each login, that expires and that logout revokes:
  ``sessions.Sessions``; HttpOnly, SameSite=Strict). Tokens are looked up by their SHA-256
  digest (``sagaway.credentials``). Wrong tokens back off per client address and globally
  (``sessions.LoginThrottle``).
- Principal: the token's, as ``request.state.principal`` (``principals.Principal``: name and
  roles), and the current principal (``principals.current_principal()``) while the request is
  handled. Without tokens (loopback only) it is ``local:<user>@<host>`` with every role. What
  it may do is ``access``'s business; every page needs ``read``.
- CSRF: an action is a POST whose form carries the per-browser random token of the
  ``sagaway_csrf`` cookie, and whose Origin (else Referer) names this host.
- Host: without a token, only requests addressed to a loopback name are answered (421
  otherwise), against DNS rebinding.
- Headers: a Content-Security-Policy allowing this origin only (no inline script or style, no
  framing), ``X-Content-Type-Options: nosniff``, ``Referrer-Policy: same-origin``.
"""

from __future__ import annotations

import dataclasses
import hmac
import math
import re
import secrets
import urllib.parse

from starlette.datastructures import FormData
from starlette.exceptions import HTTPException
from starlette.middleware.base import BaseHTTPMiddleware, RequestResponseEndpoint
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response

from sagaway import credentials
from sagaway.console import access
from sagaway.console.config import ConsoleConfig, is_loopback
from sagaway.console.sessions import LoginThrottle, Sessions
from sagaway.principals import Principal, acting_as

SESSION_COOKIE = "sagaway_session"
CSRF_COOKIE = "sagaway_csrf"
CSRF_FIELD = "csrf"
PUBLIC_PATHS = ("/login", "/static/")
"""Served without the token: the login page and its stylesheet (no workflow data)."""

HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; form-action 'self'; base-uri 'none'; object-src 'none'; "
        "frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}
_CSRF_SHAPE = re.compile(r"^[0-9a-f]{64}$")


def same(a: str, b: str) -> bool:
    """Constant-time equality of two strings."""
    return hmac.compare_digest(a.encode(), b.encode())


def client_address(request: Request) -> str:
    """The address the connection comes from (what failed logins back off by)."""
    return request.client.host if request.client is not None else "unknown"


@dataclasses.dataclass(frozen=True, slots=True)
class Wait:
    """Not checked: this address must wait ``seconds`` before its next attempt."""

    seconds: int

    @property
    def message(self) -> str:
        return f"too many wrong tokens from this address; try again in {self.seconds} s"

    def response(self) -> Response:
        return PlainTextResponse(
            f"429 Too Many Requests: {self.message}",
            status_code=429,
            headers={"Retry-After": str(self.seconds)},
        )


def known(request: Request) -> credentials.Credentials | None:
    """The console's credentials now (None: it asks for no token)."""
    found: credentials.Credentials | None = request.app.state.credentials
    return found


def principal_for(request: Request, who: str | None) -> Principal | None:
    """The principal of the token whose digest is ``who``, as the credentials name it now."""
    found = known(request)
    return None if found is None or who is None else found.tokens.get(who)


async def check_token(request: Request, given: str) -> str | Wait | None:
    """The digest of ``given`` when it is a known token (None: it is not), after the back-off
    of failed attempts (``Wait`` when this address must still wait: nothing checked); a
    failure or success is counted."""
    throttle: LoginThrottle = request.app.state.throttle
    address = client_address(request)
    wait = throttle.retry_after(address)
    if wait > 0:
        return Wait(math.ceil(wait))
    await throttle.pause()
    who = credentials.digest(given)
    if given and principal_for(request, who) is not None:
        throttle.succeeded(address)
        return who
    throttle.failed(address)
    return None


def safe_next(target: str | None) -> str:
    """A local path to go back to after logging in (never another site)."""
    if not target or not target.startswith("/") or target.startswith("//") or "\\" in target:
        return "/"
    return target


class Guard(BaseHTTPMiddleware):
    """The token check, the CSRF cookie and the security headers of every response."""

    def __init__(self, app: object, config: ConsoleConfig) -> None:
        super().__init__(app)  # type: ignore[arg-type]
        self.config = config

    async def dispatch(self, request: Request, call_next: RequestResponseEndpoint) -> Response:
        csrf = request.cookies.get(CSRF_COOKIE, "")
        fresh = not _CSRF_SHAPE.match(csrf)
        request.state.csrf = secrets.token_hex(32) if fresh else csrf
        tokens = known(request)
        sessions: Sessions = request.app.state.sessions
        principal: Principal | None = None
        refused: Response | None = None
        scheme, _, given = request.headers.get("authorization", "").partition(" ")
        if tokens is None:
            principal = request.app.state.local_principal
        elif scheme.lower() == "bearer":
            checked = await check_token(request, given.strip())
            if isinstance(checked, Wait):
                refused = checked.response()
            else:
                principal = principal_for(request, checked)
        if tokens is not None and principal is None:
            principal = principal_for(
                request, sessions.check(request.cookies.get(SESSION_COOKIE, ""))
            )
        request.state.principal = principal
        request.state.authenticated = tokens is not None and principal is not None
        public = any(request.url.path.startswith(p) for p in PUBLIC_PATHS)
        if refused is not None and not public:
            response: Response = refused
        elif tokens is None and not _loopback_host(request):
            response = PlainTextResponse(
                "421 Misdirected Request: without a token this console answers requests "
                "addressed to localhost, 127.0.0.1 or [::1] only",
                status_code=421,
            )
        elif not public and principal is None:
            response = _refuse(request)
        elif not public and principal is not None and not principal.may(access.PAGE_ROLE):
            response = PlainTextResponse(
                f"403 Forbidden: {principal.name!r} may not see this console: it needs the "
                f"role {access.PAGE_ROLE.value}",
                status_code=403,
            )
        else:
            # The views (and the Manager calls they make) run with this principal current.
            with acting_as(principal):
                response = await call_next(request)
        for name, value in HEADERS.items():
            response.headers.setdefault(name, value)
        if fresh:
            response.set_cookie(CSRF_COOKIE, request.state.csrf, httponly=True, samesite="strict")
        return response


def _refuse(request: Request) -> Response:
    """No token: a browser asking for a page goes to the login page; anything else gets 401."""
    page = request.method == "GET" and "text/html" in request.headers.get("accept", "")
    if page and not request.url.path.startswith("/fragments/"):
        target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        query = urllib.parse.urlencode({"next": target})
        return RedirectResponse(f"/login?{query}", status_code=303)
    return PlainTextResponse(
        "401 Unauthorized: this console needs its token "
        "(Authorization: Bearer TOKEN, or log in at /login)",
        status_code=401,
        headers={"WWW-Authenticate": "Bearer"},
    )


def _loopback_host(request: Request) -> bool:
    """Whether the request was addressed to a loopback name. Without a token the console
    serves only these: a web page whose own name an attacker points at 127.0.0.1 (DNS
    rebinding) would otherwise read it and pass the same-origin checks."""
    host = urllib.parse.urlsplit(f"//{request.headers.get('host', '')}").hostname or ""
    return is_loopback(host)


def _same_host(request: Request) -> bool:
    """Whether the POST comes from a page of this console: its Origin (else its Referer)
    names the host the request was sent to."""
    host = request.headers.get("host", "")
    source = request.headers.get("origin") or request.headers.get("referer") or ""
    if not host or not source or source == "null":
        return False
    return urllib.parse.urlsplit(source).netloc == host


async def checked_form(request: Request) -> FormData:
    """The form of an action POST, after the CSRF checks (403 when one fails)."""
    if not _same_host(request):
        raise HTTPException(403, "refused: the request does not come from this console's pages")
    form = await request.form()
    given = form.get(CSRF_FIELD)
    cookie = request.cookies.get(CSRF_COOKIE, "")
    if not isinstance(given, str) or not cookie or not same(given, cookie):
        raise HTTPException(403, "refused: the form's CSRF token is missing or does not match")
    return form
