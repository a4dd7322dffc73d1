"""What the console's action forms share: reading a field, the checks before an action (a
console that may act, an action that exists, a principal with its role), the name and JSON
payload of a signal or update, and the flash that says what an action came to.

Errors with a page of their own (``OWN_PAGES``: no such workflow, refused by the Engine Server,
database unavailable) pass through to it; any other refusal of the Manager is said in the
flash.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

import sagaway as sw
from sagaway.console import access
from sagaway.console.backend import UNAVAILABLE
from sagaway.console.rendering import flash
from sagaway.store import PermissionDenied

OWN_PAGES: tuple[type[BaseException], ...] = (sw.WorkflowNotFound, PermissionDenied, *UNAVAILABLE)
"""Errors the app answers with a page of their own (404, 403, 503), not in a flash."""


def text(form: Any, field: str) -> str:
    """A text field of a posted form ("" when it is missing or a file)."""
    value = form.get(field)
    return value if isinstance(value, str) else ""


def writable(request: Request) -> None:
    """403 on a console started with --read-only."""
    if request.app.state.config.read_only:
        raise HTTPException(403, "this console is read-only (started with --read-only)")


def allowed(request: Request, actions: Mapping[str, str], what: str = "action") -> str:
    """The action the URL names, one of ``actions``; 403 on a read-only console or to a
    principal without its role, 404 (``no <what> …``) for no such action."""
    writable(request)
    action = str(request.path_params["action"])
    if action not in actions:
        raise HTTPException(404, f"no {what} {action!r}")
    access.require(request, action)
    return action


def call_payload(kind: str, name: str, payload: str, example: str) -> Any:
    """The JSON ``payload`` of the signal or update ``name`` (``kind``); ``ValueError`` saying
    what is wrong (no name, or not JSON, with ``example``)."""
    if not name.strip():
        raise ValueError(f"give the {kind}'s name")
    try:
        return json.loads(payload or "null")
    except json.JSONDecodeError as exc:
        raise ValueError(
            f"the payload is not JSON ({exc}); nothing was sent. E.g. {example}"
        ) from None


async def flash_outcome(
    back: Response,
    call: Callable[[], Awaitable[bool]],
    *,
    done: str,
    unchanged: str,
    failed: str,
    unchanged_kind: str = "error",
) -> Response:
    """Make ``call`` and flash on ``back`` what it came to: ``done`` when it changed something,
    ``unchanged`` (as ``unchanged_kind``) when not, ``failed: <why>`` when it was refused."""
    try:
        changed = await call()
    except OWN_PAGES:
        raise
    except (sw.SagawayError, ValueError) as exc:
        flash(back, "error", f"{failed}: {exc}")
        return back
    flash(back, "ok" if changed else unchanged_kind, done if changed else unchanged)
    return back
