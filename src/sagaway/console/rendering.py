"""Templates and what they are given: autoescaped Jinja2, times in UTC, flash messages.

Every value shown comes through Jinja2's autoescaping, so a key or payload holding markup is
shown as text. Keys go into links URL-encoded whole (they may hold ``/``, ``?`` or ``#``).
"""

from __future__ import annotations

import datetime
import json
import urllib.parse
from pathlib import Path
from typing import Any

import jinja2
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response

import sagaway as sw
from sagaway import _human
from sagaway.console import access

TEMPLATES = Path(__file__).parent / "templates"
FLASH_COOKIE = "sagaway_flash"


def when(value: float | None) -> str:
    """``2026-12-01 10:31:02.123 UTC``; ``-`` for none."""
    if value is None:
        return "-"
    dt = datetime.datetime.fromtimestamp(value, tz=datetime.UTC)
    return f"{dt:%Y-%m-%d %H:%M:%S}.{dt.microsecond // 1000:03d} UTC"


def duration(seconds: float | None) -> str:
    """A duration in human units (``_human.duration``); ``-`` for none."""
    return "-" if seconds is None else _human.duration(seconds)


def pretty(value: Any) -> str:
    """A JSON value, indented (the template escapes it)."""
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False, default=str)


def key_url(key: str) -> str:
    """``key`` as one URL path segment (``/`` included)."""
    return urllib.parse.quote(key, safe="")


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=True,  # every template is HTML
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(when=when, duration=duration, pretty=pretty, key_url=key_url)
    env.globals.update(statuses=list(sw.WorkflowStatus), version=sw.__version__)
    return env


ENVIRONMENT = _environment()


def flash(response: Response, kind: str, text: str) -> None:
    """Show ``text`` once, on the next page the browser loads (after a redirect)."""
    value = urllib.parse.quote(json.dumps({"kind": kind, "text": text}))
    response.set_cookie(FLASH_COOKIE, value, httponly=True, samesite="strict", max_age=60)


def _take_flash(request: Request) -> dict[str, str] | None:
    raw = request.cookies.get(FLASH_COOKIE)
    if not raw:
        return None
    try:
        data = json.loads(urllib.parse.unquote(raw))
    except ValueError:
        return None
    if not isinstance(data, dict) or data.get("kind") not in ("ok", "error"):
        return None
    return {"kind": str(data["kind"]), "text": str(data.get("text", ""))}


def render(
    request: Request, template: str, context: dict[str, Any], status_code: int = 200
) -> HTMLResponse:
    """The page ``template`` with ``context``, the console's settings, the CSRF token, and the
    flash message left by the previous response (then cleared)."""
    config = request.app.state.config
    message = _take_flash(request) if not template.startswith("_") else None
    html = ENVIRONMENT.get_template(template).render(
        request=request,
        config=config,
        csrf=request.state.csrf,
        flash=message,
        authenticated=getattr(request.state, "authenticated", False),
        principal=access.principal_of(request),
        may=lambda action: access.allows(request, action),
        **context,
    )
    response = HTMLResponse(html, status_code=status_code)
    if message is not None:
        response.delete_cookie(FLASH_COOKIE, httponly=True, samesite="strict")
    return response
