"""Batch actions from the workflow list: cancel, terminate, retry or signal every workflow the
list's filters select, search attributes included (``Manager.batch``; docs/batch.md).

The list page links to ``/batch/ACTION?<its filters>`` when a filter is set. That GET page runs
the batch as a dry run (nothing changes) and shows how many workflows it would act on, a
sample of their keys and what it would refuse; its form POSTs the same query back. The POST
is CSRF-checked and role-checked as a single action is (``access.ACTION_ROLES``), runs the
batch paced at ``RATE`` calls a second on behalf of the logged-in principal, each call audited
with the reason given, and redirects to the filtered list with a summary (POST-redirect-GET).
A signal batch's form also takes the signal's name, its JSON payload and an optional dedupe id
(by default one derived from the name and payload, so the same batch sent twice sends once).
"""

from __future__ import annotations

from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

import sagaway as sw
from sagaway import search
from sagaway._engine import audit
from sagaway.console.filters import FilterError, ListFilters
from sagaway.console.rendering import flash, render
from sagaway.console.security import checked_form
from sagaway.console.views._common import manager_of
from sagaway.console.views._forms import allowed, call_payload, text
from sagaway.console.views.actions import DEFAULT_REASON, acting_for

ACTIONS = {
    "cancel": "Cancel (compensate)",
    "terminate": "Terminate",
    "retry": "Retry now",
    "signal": "Send signal",
}
RATE = 100.0
"""Calls a second: the same pacing as ``sagaway batch``'s default."""
SAMPLE = 20
"""Keys shown on the confirmation page."""
FIELDS = ("reason", "name", "payload", "dedupe_id")
"""What a batch's form sends (the signal's fields for a signal batch)."""
LIMIT = 1000
"""The most workflows one console batch acts on (its request lasts until they are done):
beyond it the page shows the ``sagaway batch`` command, with its progress bar, instead."""


def _filters(request: Request) -> tuple[ListFilters, sw.WorkflowFilter]:
    """The list's filters from the query string, and the batch filter they make; 400 when
    they cannot be read or select nothing in particular (a batch needs a filter)."""
    try:
        filters = ListFilters.from_query(
            request.query_params, request.query_params.getlist("status")
        )
        since, until = filters.bounds()
        chosen = sw.WorkflowFilter(
            name=filters.name or None,
            statuses=frozenset(filters.statuses),
            key_prefix=filters.key_prefix,
            since=since,
            until=until,
            code_versions=filters.code_versions() or frozenset(),
            where=tuple(filters.attribute_filters() or ()),
        )
        search.filters(list(chosen.where))  # a filter that does not read: 400, said why
    except (FilterError, ValueError) as exc:
        raise HTTPException(400, f"bad filter: {exc}") from None
    if not filters.active:
        raise HTTPException(400, "a batch needs a filter: set one on the workflow list first")
    return filters, chosen


async def confirm_page(request: Request) -> Response:
    action = allowed(request, ACTIONS, "batch action")
    return await _confirm(request, action, {})


async def _confirm(
    request: Request, action: str, form: dict[str, str], error: str | None = None
) -> Response:
    filters, chosen = _filters(request)
    manager = await manager_of(request)
    plan = await _plan(manager, action, chosen)
    refused = {o.value.replace("_", " "): n for o, n in plan.counts().items() if n}
    refused.pop("done", None)
    context: dict[str, Any] = {
        "action": action,
        "label": ACTIONS[action],
        "plan": plan,
        "sample": [i.key for i in plan.done[:SAMPLE]],
        "refused": refused,
        "query": filters.query(after=""),
        "described": chosen.describe(),
        "reason": form.get("reason", DEFAULT_REASON.get(action, "")),
        "form": {"payload": "null", **form},
        "error": error,
        "rate": RATE,
        "limit": LIMIT,
    }
    return render(request, "batch.html", context, 400 if error else 200)


async def _plan(manager: sw.Manager, action: str, chosen: sw.WorkflowFilter) -> sw.BatchReport:
    """The batch's dry run (a signal's name is not needed to list what it would reach)."""
    signal = "(dry run)" if action == "signal" else None
    return await manager.batch(action, chosen, dry_run=True, signal=signal)


def _signal_options(form: dict[str, str]) -> dict[str, Any]:
    """The signal a signal batch sends, from its form (ValueError says what is missing)."""
    payload = call_payload("signal", form["name"], form["payload"], '{"ok": true}')
    return {"signal": form["name"], "payload": payload, "dedupe_id": form["dedupe_id"] or None}


async def perform(request: Request) -> Response:
    action = allowed(request, ACTIONS, "batch action")
    posted = await checked_form(request)
    form = {f: text(posted, f) for f in FIELDS}
    filters, chosen = _filters(request)
    reason = form["reason"] or DEFAULT_REASON.get(action) or None
    try:
        audit.check_reason(reason)
        extra = _signal_options(form) if action == "signal" else {}
    except ValueError as exc:  # said on the form, nothing done
        return await _confirm(request, action, form, str(exc))
    manager = await manager_of(request)
    if len((await _plan(manager, action, chosen)).done) > LIMIT:
        raise HTTPException(400, f"more than {LIMIT} workflows: use `sagaway batch {action}`")
    with acting_for(request):
        report = await manager.batch(action, chosen, reason=reason, rate=RATE, **extra)
    back = RedirectResponse(f"/?{filters.query(after='')}", status_code=303)
    counts = {o: n for o, n in report.counts().items() if n}
    done = counts.pop(sw.BatchOutcome.DONE, 0)
    said = f"batch {action}: {report.matched} selected, {done} done"
    if counts:
        parts = ", ".join(f"{n} {o.value.replace('_', ' ')}" for o, n in counts.items())
        said += f", {sum(counts.values())} refused ({parts})"
    flash(back, "error" if report.failed else "ok", said)
    return back
