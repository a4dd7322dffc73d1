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
from collections.abc import Iterator
from typing import Any

from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

import sagaway as sw
from sagaway._engine import audit
from sagaway.console.rendering import flash, render
from sagaway.console.security import checked_form
from sagaway.console.views import updates
from sagaway.console.views._common import manager_of, workflow_path
from sagaway.console.views._forms import allowed, call_payload, flash_outcome, text
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
SAID = {
    "retry": (
        "will be retried by the next worker scan",
        "is {status}, not SUSPENDED: nothing to retry",
    ),
    "cancel": (
        "cancel requested: it compensates and ends CANCELLED",
        "had already ended ({status})",
    ),
    "terminate": ("TERMINATED ({reason})", "had already ended ({status})"),
    "pause": (
        "paused: no worker runs it until it is resumed",
        "was not paused: it has ended ({status})",
    ),
    "resume": ("resumed: workers run it again", "was not paused ({status})"),
}
"""What the flash says of an action on one workflow: when it did something, and when it did
not (with the workflow's status)."""
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


async def confirm_page(request: Request) -> Response:
    action = allowed(request, ACTIONS)
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
    action = allowed(request, ACTIONS)
    form = await checked_form(request)
    key = request.path_params["key"]
    manager = await manager_of(request)
    back = RedirectResponse(workflow_path(key), status_code=303)
    try:
        audit.check_reason(text(form, "reason") or None)
    except ValueError as exc:  # too long: said on the form, nothing done
        fields = {f: text(form, f) for f in FIELDS if text(form, f)}
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
    reason = text(form, "reason") or DEFAULT_REASON.get(action, "")
    if action == "retry":
        changed = await manager.retry(key, reason=reason or None)
    else:
        switch = {
            "cancel": manager.cancel,
            "terminate": manager.terminate,
            "pause": manager.pause,
            "resume": manager.resume,
        }
        changed = await switch[action](key, reason)
    done, refused = SAID[action]
    if changed:
        flash(back, "ok", f"{key}: {done.format(reason=reason)}")
    else:
        status = await manager.get_workflow(key).status()
        flash(back, "error", f"{key} {refused.format(status=status.value)}")
    return back


async def _signal(
    request: Request, manager: sw.Manager, key: str, form: FormData, back: Response
) -> Response:
    entered = {f: text(form, f) for f in ("name", "payload", "dedupe_id", "reason")}
    name, dedupe_id = entered["name"], entered["dedupe_id"]
    try:
        data = call_payload("signal", name, entered["payload"], '{"ok": true}')
    except ValueError as exc:
        return await _confirm(request, "signal", entered, str(exc))
    return await flash_outcome(
        back,
        lambda: manager.signal(name).send(
            key, data, dedupe_id=dedupe_id or None, reason=entered["reason"] or None
        ),
        done=f"{key}: signal {name!r} sent (its payload is checked when received)",
        unchanged=f"{key}: signal {name!r} with dedupe id {dedupe_id!r} was already sent",
        unchanged_kind="ok",
        failed=f"{key}: signal {name!r} not sent",
    )


async def _update(request: Request, manager: sw.Manager, key: str, form: FormData) -> Response:
    entered = {f: text(form, f) for f in ("name", "payload", "update_id")}
    try:
        data = call_payload("update", entered["name"], entered["payload"], '{"amount": 21}')
    except ValueError as exc:
        return await _confirm(request, "update", entered, str(exc))
    update_id = entered["update_id"] or updates.fresh_id()
    outcome = await updates.send(manager, key, entered["name"], data, update_id)
    # The form again, for another update: a fresh id, unless this one is still pending.
    again = {**entered, "update_id": update_id if outcome.kind == "pending" else ""}
    return await _confirm(request, "update", {k: v for k, v in again.items() if v}, None, outcome)
