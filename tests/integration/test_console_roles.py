"""The console's roles matrix: each role (and an unknown token) against each page and action.

``EXPECTED_ACTIONS`` is written out here, so that a change of ``access.ACTION_ROLES`` fails
until this test agrees. For each principal: the pages answer (``read``), the buttons shown are
the actions it may take, and each action's confirmation page and POST are done or refused
(403, saying who needs what) on the server side, whatever the page showed. Through Starlette's
TestClient, on SQLite (and the console's own token as ``default``, admin).
"""

from __future__ import annotations

import asyncio
import html
import re
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("starlette", reason="the [ui] extra is part of the dev install")

from starlette.requests import Request
from starlette.responses import Response
from starlette.testclient import TestClient

import sagaway as sw
from sagaway import credentials
from sagaway.console import ConsoleConfig, access, create_app
from sagaway.console.app import reload_credentials
from sagaway.console.views import listing
from sagaway.principals import ALL_ROLES, Principal, Role, current_principal
from tests.integration import console_app

BASE = "http://127.0.0.1:8080"
CSRF = re.compile(r'name="csrf" value="([0-9a-f]{64})"')
ROLES = {"reader": Role.READ, "operator": Role.OPERATE, "worker": Role.WORKER, "admin": Role.ADMIN}
TOKENS = {name: f"console-{name}" for name in ROLES} | {"default": "the-single-token"}
EVERYONE = frozenset(TOKENS)
EXPECTED_ACTIONS = {
    "retry": frozenset({"operator", "admin", "default"}),
    "cancel": frozenset({"operator", "admin", "default"}),
    "signal": frozenset({"operator", "admin", "default"}),
    "terminate": frozenset({"admin", "default"}),
    # After terminate, in this order: the loop below sends these to an ended workflow, so an
    # update is answered at once (it ended without answering) instead of waiting for one.
    "update": frozenset({"operator", "admin", "default"}),
    "pause": frozenset({"operator", "admin", "default"}),
    "resume": frozenset({"operator", "admin", "default"}),
}
PAGES = [
    "/",
    "/fragments/list",
    "/workflows/held-1",
    "/fragments/workflow/held-1",
    "/metrics",
    "/paused",
]


def test_the_table_of_actions_is_the_expected_one() -> None:
    assert set(access.ACTION_ROLES) == set(EXPECTED_ACTIONS)
    for action, needed in access.ACTION_ROLES.items():
        allowed = {
            name for name, role in ROLES.items() if Principal(name, frozenset({role})).may(needed)
        }
        assert allowed | {"default"} == EXPECTED_ACTIONS[action], action


class Browser:
    """The console as one principal sees it: every request carries its bearer token."""

    def __init__(self, client: TestClient, token: str) -> None:
        self.client = client
        self.headers = {"Authorization": f"Bearer {token}"}

    async def get(self, path: str) -> Any:
        return await asyncio.to_thread(self.client.get, path, headers=self.headers)

    async def post(self, path: str, data: dict[str, str]) -> Any:
        headers = {**self.headers, "Origin": BASE}
        return await asyncio.to_thread(
            self.client.post, path, data=data, headers=headers, follow_redirects=False
        )

    async def csrf(self, path: str = "/") -> str:
        found = CSRF.search((await self.get(path)).text)
        assert found is not None
        return found.group(1)


def tokens_file(folder: Path) -> Path:
    path = folder / "tokens.toml"
    path.write_text(
        "".join(
            credentials.toml_entry(name, [role], credentials.digest(TOKENS[name]))
            for name, role in ROLES.items()
        )
    )
    return path


@contextmanager
def served(url: str, folder: Path, **config: Any) -> Iterator[TestClient]:
    app = create_app(
        ConsoleConfig(url=url, tokens_file=tokens_file(folder), token=TOKENS["default"], **config)
    )
    with TestClient(app, base_url=BASE) as client:
        yield client


@pytest.fixture(autouse=True)
def _metrics_off_after() -> Iterator[None]:
    """``/metrics`` turns the process's metrics on: turn them off for the next tests."""
    yield
    from sagaway.telemetry import metrics

    metrics.disable_metrics()


@pytest.fixture
async def manager(sqlite_url: str, tmp_path: Path) -> AsyncIterator[sw.Manager]:
    m = console_app.build(sqlite_url, tmp_path / "never")
    async with m:
        await m.workflow("held", "parcel").execute(idempotency_key="held-1")
        await m.workflow("flaky", "parcel").execute(idempotency_key="flaky-1")
        for key, status in (("held-1", "WAITING"), ("flaky-1", "SUSPENDED")):
            for _ in range(1500):
                if (await m.get_workflow(key).status()).value == status:
                    break
                await asyncio.sleep(0.02)
            else:
                raise AssertionError(f"{key} never became {status}")
        yield m


async def test_each_principal_against_each_page_and_action(
    manager: sw.Manager, sqlite_url: str, tmp_path: Path
) -> None:
    with served(sqlite_url, tmp_path) as client:
        for name, token in TOKENS.items():
            browser = Browser(client, token)
            for path in PAGES:
                assert (await browser.get(path)).status_code == 200, (name, path)
            page = (await browser.get("/workflows/held-1")).text
            live = ("signal", "cancel", "terminate", "update", "pause")  # a WAITING workflow's
            shown = {a for a in live if f'id="action-{a}"' in page}
            assert shown == {a for a in live if name in EXPECTED_ACTIONS[a]}, name
            suspended = (await browser.get("/workflows/flaky-1")).text
            assert ('id="action-retry"' in suspended) == (name in EXPECTED_ACTIONS["retry"])
            assert f"{name} · " in page  # who is logged in, in the header

        # The actions, done (or refused) server-side whatever the page showed: an ended
        # workflow's actions are still judged first by role.
        for action, allowed in EXPECTED_ACTIONS.items():
            for name in sorted(TOKENS, key=lambda n: n == "admin" or n == "default"):
                browser = Browser(client, TOKENS[name])
                path = f"/actions/{action}/held-1"
                confirm = await browser.get(path)
                form = {"csrf": await browser.csrf(), "name": "approval", "payload": "null"}
                done = await browser.post(path, form)
                if name in allowed:
                    assert confirm.status_code == 200, (action, name)
                    # An update answers on its form's page; the others redirect.
                    expected = 200 if action == "update" else 303
                    assert done.status_code == expected, (action, name, done.text)
                else:
                    assert confirm.status_code == 403, (action, name)
                    assert done.status_code == 403, (action, name)
                    said = html.unescape(done.text)
                    assert f"{name!r} (roles: {ROLES[name].value}) may not {action}" in said
                    assert f"needs the role {access.ACTION_ROLES[action].value}" in said

        # An unknown token sees nothing and does nothing (five tries before the back-off).
        stranger = Browser(client, "not-a-token")
        for path in ("/", "/workflows/held-1", "/metrics"):
            assert (await stranger.get(path)).status_code == 401
        assert (await stranger.post("/actions/cancel/held-1", {})).status_code == 401
    # The allowed actions were done: cancelled, then terminated (whichever landed first).
    status = await manager.get_workflow("held-1").status()
    assert status in (sw.WorkflowStatus.CANCELLED, sw.WorkflowStatus.TERMINATED)


async def test_pausing_an_activity_needs_the_pause_and_resume_roles(
    manager: sw.Manager, sqlite_url: str, tmp_path: Path
) -> None:
    with served(sqlite_url, tmp_path) as client:
        for name, token in TOKENS.items():
            browser = Browser(client, token)
            page = (await browser.get("/paused")).text
            assert ('id="pause-form"' in page) == (name in EXPECTED_ACTIONS["pause"]), name
            for op in ("pause", "resume"):
                form = {"csrf": await browser.csrf(), "op": op, "kind": "queue", "name": name}
                done = await browser.post("/paused", form)
                if name in EXPECTED_ACTIONS[op]:
                    assert done.status_code == 303, (op, name, done.text)
                else:
                    assert done.status_code == 403, (op, name)
                    said = html.unescape(done.text)
                    assert f"{name!r} (roles: {ROLES[name].value}) may not {op}" in said
    entries = await manager.audit_log(action="pause")
    assert sorted(e.details.get("queue") for e in entries) == ["admin", "default", "operator"]


async def test_the_principal_is_on_the_request_and_current_in_views(
    manager: sw.Manager, sqlite_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[tuple[Principal | None, Principal | None]] = []
    original: Callable[[Request], Any] = listing.list_page

    async def spy(request: Request) -> Response:
        seen.append((request.state.principal, current_principal()))
        response: Response = await original(request)
        return response

    monkeypatch.setattr(listing, "list_page", spy)
    with served(sqlite_url, tmp_path) as client:
        await Browser(client, TOKENS["reader"]).get("/")
        # A login session carries the principal of the token it was opened with.
        csrf = CSRF.search((await asyncio.to_thread(client.get, "/login")).text)
        assert csrf is not None
        form = {"csrf": csrf.group(1), "token": TOKENS["operator"], "next": "/"}
        login = await asyncio.to_thread(
            client.post, "/login", data=form, headers={"Origin": BASE}, follow_redirects=False
        )
        assert login.status_code == 303
        await asyncio.to_thread(client.get, "/")
    reader = Principal("reader", frozenset({Role.READ}))
    operator = Principal("operator", frozenset({Role.OPERATE}))
    assert seen == [(reader, reader), (operator, operator)]
    assert current_principal() is None


async def test_a_console_without_tokens_acts_as_the_local_user(
    manager: sw.Manager, sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[Principal | None] = []
    original: Callable[[Request], Any] = listing.list_page

    async def spy(request: Request) -> Response:
        seen.append(request.state.principal)
        response: Response = await original(request)
        return response

    monkeypatch.setattr(listing, "list_page", spy)
    app = create_app(ConsoleConfig(url=sqlite_url))
    with TestClient(app, base_url=BASE) as client:
        assert (await asyncio.to_thread(client.get, "/")).status_code == 200
    assert len(seen) == 1 and seen[0] is not None
    assert seen[0].name.startswith("local:") and seen[0].roles == ALL_ROLES


async def test_a_reload_applies_to_open_sessions(
    manager: sw.Manager, sqlite_url: str, tmp_path: Path
) -> None:
    """Removing a token from the file (and reloading) ends its sessions; changing its roles
    changes what the session may do at its next request."""
    with served(sqlite_url, tmp_path) as client:
        csrf = CSRF.search((await asyncio.to_thread(client.get, "/login")).text)
        assert csrf is not None
        form = {"csrf": csrf.group(1), "token": TOKENS["operator"], "next": "/"}
        await asyncio.to_thread(client.post, "/login", data=form, headers={"Origin": BASE})
        assert (await asyncio.to_thread(client.get, "/actions/cancel/held-1")).status_code == 200

        path = tmp_path / "tokens.toml"
        path.write_text(
            credentials.toml_entry("operator", [Role.READ], credentials.digest(TOKENS["operator"]))
        )
        # The file's one token, and the single token (default).
        assert reload_credentials(client.app) == "2 tokens, 0 certificates"  # type: ignore[arg-type]
        assert (await asyncio.to_thread(client.get, "/actions/cancel/held-1")).status_code == 403
        assert (await asyncio.to_thread(client.get, "/")).status_code == 200

        path.write_text("[[token]]\n")  # a bad file: refused, the previous one stays
        with pytest.raises(credentials.TokensFileError):
            reload_credentials(client.app)  # type: ignore[arg-type]
        assert (await asyncio.to_thread(client.get, "/")).status_code == 200

        path.write_text(credentials.toml_entry("other", [Role.READ], credentials.digest("x")))
        reload_credentials(client.app)  # type: ignore[arg-type]
        page = await asyncio.to_thread(client.get, "/", follow_redirects=False)
        assert page.status_code in (303, 401)  # logged out: the token is gone


@pytest.mark.grpc
async def test_the_engine_servers_refusal_of_the_consoles_own_token_is_a_403_page(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The console judges its users; the Engine Server judges the console (its $SAGAWAY_TOKEN):
    an action the server refuses is told as such, not as a crash."""
    from tests.grpc_server import ServerProcess

    path = tmp_path / "server-tokens.toml"
    path.write_text(
        credentials.toml_entry("ui", [Role.READ], credentials.digest("ui-token"))
        + credentials.toml_entry("boss", [Role.ADMIN], credentials.digest("boss-token"))
    )
    with ServerProcess(f"sqlite:///{tmp_path / 'db.sqlite'}", tokens_file=path) as server:
        boss = sw.Manager(server.url, token="boss-token")
        async with boss.connect():  # no worker runs it: it stays PENDING
            await boss.start_by_name("held", {"item": "x"}, idempotency_key="held-9")
        monkeypatch.setenv("SAGAWAY_TOKEN", "ui-token")
        app = create_app(ConsoleConfig(url=server.url))
        with TestClient(app, base_url=BASE) as client:
            browser = Browser(client, "unused: this console asks for no token")
            assert (await browser.get("/workflows/held-9")).status_code == 200
            action = "/actions/terminate/held-9"
            done = await browser.post(action, {"csrf": await browser.csrf(action), "reason": "x"})
            said = html.unescape(done.text)
            assert done.status_code == 403, said
            assert "Refused by the Engine Server" in said
            assert "principal 'ui' (roles: read) may not call EndWorkflow" in said
            # The newer actions alike: an update, a pause, an activity's pause.
            for path, form, rpc in (
                ("/actions/update/held-9", {"name": "approve", "payload": "1"}, "SendSignal"),
                ("/actions/pause/held-9", {}, "PauseWorkflow"),
                ("/paused", {"op": "pause", "kind": "activity", "name": "book"}, "PauseCalls"),
            ):
                token = await browser.csrf("/paused")
                done = await browser.post(path, {"csrf": token, **form})
                said = html.unescape(done.text)
                assert done.status_code == 403, (path, said)
                assert f"principal 'ui' (roles: read) may not call {rpc}" in said
