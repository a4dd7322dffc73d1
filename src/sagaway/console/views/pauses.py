"""The paused activities and queues (an incident switch): listed, paused and resumed by name.

``/paused`` lists what is paused in the cluster (``Manager.paused_calls``), each with a
"Resume" button, and has a form to pause an activity or a queue by name. Pausing holds back
new attempts of that activity (or of every activity of that queue) in every process; attempts
running finish (docs/pause.md). The POST is CSRF-checked and role-checked as the workflow
actions "pause" and "resume" are (``access.ACTION_ROLES``), made on behalf of the logged-in
principal, audited with the reason, and redirected back with a flash (POST-redirect-GET).
"""

from __future__ import annotations

from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from sagaway._engine import audit
from sagaway.console import access
from sagaway.console.rendering import flash, render
from sagaway.console.security import checked_form
from sagaway.console.views._common import manager_of
from sagaway.console.views._forms import flash_outcome, text, writable
from sagaway.console.views.actions import DEFAULT_REASON, acting_for

KINDS = ("activity", "queue")
OPS = ("pause", "resume")


async def paused_page(request: Request) -> Response:
    manager = await manager_of(request)
    calls = sorted(await manager.paused_calls(), key=lambda c: (c.kind, c.name))
    context: dict[str, Any] = {"calls": calls, "reason": DEFAULT_REASON["pause"]}
    return render(request, "paused.html", context)


async def perform(request: Request) -> Response:
    writable(request)
    form = await checked_form(request)
    op, kind, name = (text(form, field).strip() for field in ("op", "kind", "name"))
    if op not in OPS:
        raise HTTPException(400, "op must be pause or resume")
    access.require(request, op)
    if kind not in KINDS:
        raise HTTPException(400, f"kind must be one of {', '.join(KINDS)}")
    back = RedirectResponse("/paused", status_code=303)
    if not name:
        flash(back, "error", f"give the {kind}'s name")
        return back
    reason = text(form, "reason").strip() or DEFAULT_REASON[op]
    manager = await manager_of(request)
    calls = {
        ("pause", "activity"): manager.pause_activity,
        ("resume", "activity"): manager.resume_activity,
        ("pause", "queue"): manager.pause_queue,
        ("resume", "queue"): manager.resume_queue,
    }

    async def switch() -> bool:
        audit.check_reason(reason)
        with acting_for(request):
            return await calls[op, kind](name, reason)

    state = "paused already" if op == "pause" else "not paused"
    return await flash_outcome(
        back,
        switch,
        done=f"{kind} {name!r} {op}d",
        unchanged=f"{kind} {name!r} was {state}: nothing changed",
        failed=f"{kind} {name!r} not {op}d",
    )
