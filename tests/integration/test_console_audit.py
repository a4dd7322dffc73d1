"""The audit trail in the web console, on every backend: each action (retry, cancel,
terminate, signal) is recorded with the reason typed in its form, on behalf of the logged-in
principal (``request.state.principal``; ``console`` without one), and the workflow's page
shows its entries; a reason too long is refused on the form, nothing done."""

from __future__ import annotations

import html
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

import sagaway as sw

pytest.importorskip("starlette", reason="the [ui] extra is part of the dev install")

from starlette.testclient import TestClient
from starlette.types import ASGIApp, Receive, Scope, Send

from sagaway.console import ConsoleConfig, create_app
from sagaway.principals import Principal, local_actor
from tests.integration import console_app
from tests.integration.test_console import BASE, Console, Env, text_of

S = sw.WorkflowStatus


class LoggedIn:
    """Stands for the console's login (another part of the console): the request's
    principal is ``name``."""

    def __init__(self, app: ASGIApp, name: str) -> None:
        self.app = app
        self.name = name

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            scope.setdefault("state", {})["principal"] = Principal(self.name)
        await self.app(scope, receive, send)


@contextmanager
def console(url: str, principal: str | None) -> Iterator[Console]:
    app: Any = create_app(ConsoleConfig(url=url))
    if principal is not None:
        app = LoggedIn(app, principal)
    with TestClient(app, base_url=BASE) as client:
        yield Console(client)


@pytest.fixture(params=[None, "alice"], ids=["no-login", "alice"])
async def env(request: pytest.FixtureRequest, db_url: str, tmp_path: Path) -> AsyncIterator[Env]:
    flag = tmp_path / "courier-back"
    manager = console_app.build(db_url, flag)
    async with manager:
        with console(db_url, request.param) as ui:
            yield Env(manager, ui, flag, db_url)


def expect_who(env: Env, entry: sw.AuditEntry, name: str) -> None:
    actor = "anonymous@127.0.0.1" if env.url.startswith("grpc") else local_actor()
    assert (entry.actor, entry.on_behalf_of) == (actor, name)


async def test_console_actions_are_recorded_and_shown(env: Env, request: Any) -> None:
    name = request.node.callspec.params["env"] or "console"
    await env.start("flaky", "ship-1")
    await env.start("held", "hold-1")
    await env.start("held", "hold-2")
    await env.wait_for("ship-1", S.SUSPENDED)
    await env.wait_for("hold-1", S.WAITING)
    await env.wait_for("hold-2", S.WAITING)
    env.flag.touch()
    await env.ui.act_and_follow("retry", "ship-1", reason="courier is back")
    await env.ui.act_and_follow(
        "signal", "hold-1", name="approval", payload='{"ok": true, "by": "ops"}', reason="phoned"
    )
    await env.ui.act_and_follow("cancel", "hold-2", reason="customer changed mind")
    await env.ui.act_and_follow("terminate", "hold-2", reason="too slow")  # may have ended
    trail = list(reversed(await env.manager.audit_log()))
    assert [(e.action, e.target, e.reason) for e in trail[:3]] == [
        ("retry", "ship-1", "courier is back"),
        ("signal", "hold-1", "phoned"),
        ("cancel", "hold-2", "customer changed mind"),
    ]
    assert len(trail) in (3, 4)  # the terminate only if the cancel had not ended it yet
    for entry in trail:
        expect_who(env, entry, name)

    page = await env.ui.get("/workflows/hold-2")
    text = text_of(page.text)
    assert "Audit trail" in text and "customer changed mind" in text
    assert f"{name} (via " in html.unescape(page.text)
    fragment = text_of((await env.ui.get("/fragments/workflow/ship-1")).text)
    assert "Audit trail" in fragment and "courier is back" in fragment


async def test_a_reason_too_long_is_refused_on_the_form(env: Env) -> None:
    await env.start("held", "hold-9")
    await env.wait_for("hold-9", S.WAITING)
    refused = await env.ui.act("terminate", "hold-9", reason="x" * 1001)
    assert refused.status_code == 400
    assert "at most 1000 characters" in text_of(refused.text)
    assert (await env.manager.get_workflow("hold-9").status()) is S.WAITING
    assert await env.manager.audit_log() == []
