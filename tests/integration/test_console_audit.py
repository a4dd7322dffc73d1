"""The audit trail in the web console, on every backend: each action (retry, cancel,
terminate, signal) is recorded with the reason typed in its form, on behalf of the logged-in
principal (``request.state.principal``: the token's name, or the local user for a console
without tokens), and the workflow's page shows its entries; a reason too long is refused on
the form, nothing done."""

from __future__ import annotations

import hashlib
import html
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

import sagaway as sw

pytest.importorskip("starlette", reason="the [ui] extra is part of the dev install")

from starlette.testclient import TestClient

from sagaway.console import ConsoleConfig, create_app
from sagaway.principals import local_actor
from tests.integration import console_app
from tests.integration.test_console import BASE, Console, Env, text_of

S = sw.WorkflowStatus


ALICE_TOKEN = "alice-" + "0" * 40


def tokens_file(folder: Path) -> Path:
    """A tokens file naming ``alice`` (operate and admin), as ``sagaway ui --tokens-file``."""
    digest = hashlib.sha256(ALICE_TOKEN.encode()).hexdigest()
    path = folder / "tokens.toml"
    path.write_text(
        f'[[token]]\nname = "alice"\nroles = ["operate", "admin"]\nsha256 = "{digest}"\n'
    )
    return path


@contextmanager
def console(url: str, principal: str | None, folder: Path) -> Iterator[Console]:
    """The console without tokens (it acts as the local user), or logged in as ``alice``."""
    if principal is None:
        app: Any = create_app(ConsoleConfig(url=url))
        headers = {}
    else:
        app = create_app(ConsoleConfig(url=url, tokens_file=tokens_file(folder)))
        headers = {"Authorization": f"Bearer {ALICE_TOKEN}"}
    with TestClient(app, base_url=BASE, headers=headers) as client:
        yield Console(client)


@pytest.fixture(params=[None, "alice"], ids=["no-login", "alice"])
async def env(request: pytest.FixtureRequest, db_url: str, tmp_path: Path) -> AsyncIterator[Env]:
    flag = tmp_path / "courier-back"
    manager = console_app.build(db_url, flag)
    async with manager:
        with console(db_url, request.param, tmp_path) as ui:
            yield Env(manager, ui, flag, db_url)


def expect_who(env: Env, entry: sw.AuditEntry, name: str) -> None:
    actor = "anonymous@127.0.0.1" if env.url.startswith("grpc") else local_actor()
    assert (entry.actor, entry.on_behalf_of) == (actor, name)


async def test_console_actions_are_recorded_and_shown(env: Env, request: Any) -> None:
    name = request.node.callspec.params["env"] or local_actor()
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
    shown = entry.who  # "alice (via ...)", or one name when actor and principal are one
    assert shown.startswith(name) and shown in html.unescape(page.text)
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
