"""Operator actions: retry, cancel, terminate, signal, update, pause, resume.

Who may do which is ``access.ACTION_ROLES`` (operate; terminate needs admin): the confirmation
page and the POST are both refused (403) to a principal without the role.

Each has a confirmation page (GET, works without JavaScript) whose form POSTs the action; the
POST is CSRF-checked, done through the Manager, and answered with a redirect to the workflow's
page, where a flash message says what happened (POST-redirect-GET); an update is answered with
its outcome on the form's page instead (``views.updates``). Each is recorded in the
audit trail with the reason given, made on behalf of the logged-in principal (``acting_for``).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import Any

from starlette.datastructures import FormData
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

import sagaway as sw
from sagaway._engine import audit
from sagaway.console import access
from sagaway.console.backend import UNAVAILABLE
from sagaway.console.rendering import flash, render
from sagaway.console.security import checked_form
from sagaway.console.views import updates
from sagaway.console.views._common import manager_of, workflow_path
from sagaway.principals import Principal, current_principal, set_current_principal

ACTIONS = {
    "retry": "Retry now",
    "cancel": "Cancel (compensate)",
    "terminate": "Terminate",
    "signal": "Send signal",
    "update": "Send update",
    "pause": "Pause",
    "resume": "Resume",
}
DEFAULT_REASON = {
    "cancel": "cancelled from the web console",
    "terminate": "terminated from the web console",
    "pause": "paused from the web console",
    "resume": "resumed from the web console",
}
FIELDS = ("reason", "name", "payload", "dedupe_id", "update_id")
CONSOLE = "console"
"""Who acts when the console knows no principal of the request (no login): the audit trail
then says ``console`` on behalf of whom (and, through an Engine Server, via which token)."""


@contextlib.contextmanager
def acting_for(request: Request) -> Iterator[None]:
    """The Manager's calls made inside are on behalf of the request's principal (the one the
    console logged in: ``request.state.principal``), or of ``console``."""
    principal = getattr(request.state, "principal", None)
    if not isinstance(principal, Principal):
        principal = Principal(CONSOLE)
    previous = current_principal()
    set_current_principal(principal)
    try:
        yield
    finally:
        set_current_principal(previous)


def _allowed(request: Request) -> str:
    """The action named by the URL; 403 on a read-only console or to a principal without its
    role, 404 for no such action."""
    if request.app.state.config.read_only:
        raise HTTPException(403, "this console is read-only (started with --read-only)")
    action = str(request.path_params["action"])
    if action not in ACTIONS:
        raise HTTPException(404, f"no action {action!r}")
    access.require(request, action)
    return action


async def confirm_page(request: Request) -> Response:
    action = _allowed(request)
    return await _confirm(request, action, {})


async def _confirm(
    request: Request,
    action: str,
    form: dict[str, str],
    error: str | None = None,
    outcome: updates.Outcome | None = None,
) -> Response:
    key = request.path_params["key"]
    d = await (await manager_of(request)).get_workflow(key).describe()
    defaults = {"reason": DEFAULT_REASON.get(action, ""), "payload": "null"}
    if action == "update":
        defaults["update_id"] = updates.fresh_id()
    context: dict[str, Any] = {
        "d": d,
        "action": action,
        "label": ACTIONS[action],
        "form": {**defaults, **form},
        "error": error,
        "outcome": outcome,
    }
    return render(request, "confirm.html", context, 400 if error else 200)


async def perform(request: Request) -> Response:
    action = _allowed(request)
    form = await checked_form(request)
    key = request.path_params["key"]
    manager = await manager_of(request)
    back = RedirectResponse(workflow_path(key), status_code=303)
    try:
        audit.check_reason(_text(form, "reason") or None)
    except ValueError as exc:  # too long: said on the form, nothing done
        fields = {f: _text(form, f) for f in FIELDS if _text(form, f)}
        return await _confirm(request, action, fields, str(exc))
    with acting_for(request):
        return await _act(request, manager, action, key, form, back)


async def _act(
    request: Request,
    manager: sw.Manager,
    action: str,
    key: str,
    form: FormData,
    back: Response,
) -> Response:
    if action == "signal":
        return await _signal(request, manager, key, form, back)
    if action == "update":
        return await _update(request, manager, key, form)
    reason = _text(form, "reason") or DEFAULT_REASON.get(action, "")
    if action in ("pause", "resume"):
        return await _pause(manager, action, key, reason, back)
    if action == "retry":
        changed = await manager.retry(key, reason=reason or None)
        done, refused = (
            "will be retried by the next worker scan",
            "is {}, not SUSPENDED: nothing to retry",
        )
    elif action == "cancel":
        changed = await manager.cancel(key, reason)
        done, refused = (
            "cancel requested: it compensates and ends CANCELLED",
            "had already ended ({})",
        )
    else:
        changed = await manager.terminate(key, reason)
        done, refused = f"TERMINATED ({reason})", "had already ended ({})"
    if changed:
        flash(back, "ok", f"{key}: {done}")
    else:
        status = await manager.get_workflow(key).status()
        flash(back, "error", f"{key} {refused.format(status.value)}")
    return back


async def _signal(
    request: Request, manager: sw.Manager, key: str, form: FormData, back: Response
) -> Response:
    name, payload, dedupe_id, reason = (
        _text(form, f) for f in ("name", "payload", "dedupe_id", "reason")
    )
    entered = {"name": name, "payload": payload, "dedupe_id": dedupe_id, "reason": reason}
    if not name.strip():
        return await _confirm(request, "signal", entered, "give the signal's name")
    try:
        data = json.loads(payload or "null")
    except json.JSONDecodeError as exc:
        error = f'the payload is not JSON ({exc}); nothing was sent. E.g. {{"ok": true}}'
        return await _confirm(request, "signal", entered, error)
    try:
        stored = await manager.signal(name).send(
            key, data, dedupe_id=dedupe_id or None, reason=reason or None
        )
    except sw.WorkflowNotFound:
        raise
    except UNAVAILABLE:
        raise
    except (sw.SagawayError, ValueError) as exc:
        flash(back, "error", f"{key}: signal {name!r} not sent: {exc}")
        return back
    if stored:
        flash(back, "ok", f"{key}: signal {name!r} sent (its payload is checked when received)")
    else:
        flash(back, "ok", f"{key}: signal {name!r} with dedupe id {dedupe_id!r} was already sent")
    return back


async def _pause(
    manager: sw.Manager, action: str, key: str, reason: str, back: Response
) -> Response:
    if action == "pause":
        changed = await manager.pause(key, reason)
        done = "paused: no worker runs it until it is resumed"
        refused = "was not paused: it has ended ({})"
    else:
        changed = await manager.resume(key, reason)
        done, refused = "resumed: workers run it again", "was not paused ({})"
    if changed:
        flash(back, "ok", f"{key}: {done}")
    else:
        status = await manager.get_workflow(key).status()
        flash(back, "error", f"{key} {refused.format(status.value)}")
    return back


async def _update(request: Request, manager: sw.Manager, key: str, form: FormData) -> Response:
    entered = {f: _text(form, f) for f in ("name", "payload", "update_id")}
    name, payload = entered["name"], entered["payload"]
    if not name.strip():
        return await _confirm(request, "update", entered, "give the update's name")
    try:
        data = json.loads(payload or "null")
    except json.JSONDecodeError as exc:
        error = f'the payload is not JSON ({exc}); nothing was sent. E.g. {{"amount": 21}}'
        return await _confirm(request, "update", entered, error)
    update_id = entered["update_id"] or updates.fresh_id()
    outcome = await updates.send(manager, key, name, data, update_id)
    # The form again, for another update: a fresh id, unless this one is still pending.
    again = {**entered, "update_id": update_id if outcome.kind == "pending" else ""}
    return await _confirm(request, "update", {k: v for k, v in again.items() if v}, None, outcome)


def _text(form: FormData, field: str) -> str:
    value = form.get(field)
    return value if isinstance(value, str) else ""
