"""The web console (``sagaway ui``) through Starlette's TestClient, on every backend: the list's
counts, filters and pages; a workflow's page; each action; and what it refuses (CSRF, missing
token, read-only) or escapes.

Workflows run in an in-test Manager (its workers); the console opens its own Manager on the
same URL, as a separate ``sagaway ui`` process would.
"""

from __future__ import annotations

import asyncio
import dataclasses
import html
import re
import time
import urllib.parse
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

import sagaway as sw

pytest.importorskip("starlette", reason="the [ui] extra is part of the dev install")

from starlette.testclient import TestClient

from sagaway.console import ConsoleConfig, create_app
from tests.integration import console_app

BASE = "http://127.0.0.1:8080"
CSRF = re.compile(r'name="csrf" value="([0-9a-f]{64})"')


class Console:
    """A TestClient called from a thread, so the test's event loop (and the workers running
    the workflows) go on while the console answers."""

    def __init__(self, client: TestClient) -> None:
        self.client = client

    async def get(self, path: str, **kwargs: Any) -> Any:
        return await asyncio.to_thread(self.client.get, path, **kwargs)

    async def post(self, path: str, **kwargs: Any) -> Any:
        return await asyncio.to_thread(self.client.post, path, **kwargs)

    async def csrf(self, path: str = "/") -> str:
        page = await self.get(path)
        found = CSRF.search(page.text)
        assert found is not None, page.text
        return found.group(1)

    async def act(self, action: str, key: str, **fields: str) -> Any:
        """Open the action's confirmation page, submit its form; the response (a redirect)."""
        path = f"/actions/{action}/{quote(key)}"
        token = await self.csrf(path)
        return await self.post(
            path, data={"csrf": token, **fields}, headers={"Origin": BASE}, follow_redirects=False
        )

    async def act_and_follow(self, action: str, key: str, **fields: str) -> str:
        response = await self.act(action, key, **fields)
        assert response.status_code == 303, response.text
        assert response.headers["location"] == f"/workflows/{quote(key)}"
        return str((await self.get(response.headers["location"])).text)


def quote(key: str) -> str:
    return urllib.parse.quote(key, safe="")


def text_of(page: str) -> str:
    """The page's text as a reader sees it (tags dropped, entities decoded)."""
    return html.unescape(re.sub(r"<[^>]+>", " ", page))


def count_of(page: str, status: str) -> int:
    found = re.search(rf'data-status="{status}">(\d+)<', page)
    assert found is not None, status
    return int(found.group(1))


@contextmanager
def console(url: str, **config: Any) -> Iterator[Console]:
    with TestClient(create_app(ConsoleConfig(url=url, **config)), base_url=BASE) as client:
        yield Console(client)


@dataclasses.dataclass
class Env:
    manager: sw.Manager
    ui: Console
    flag: Path
    url: str

    async def start(self, workflow: str, key: str, item: str = "parcel") -> None:
        await self.manager.workflow(workflow, item).execute(idempotency_key=key)

    async def wait_for(self, key: str, *statuses: sw.WorkflowStatus) -> sw.WorkflowDescription:
        deadline = time.monotonic() + 30
        while True:
            d = await self.manager.get_workflow(key).describe()
            if d.status in statuses:
                return d
            assert time.monotonic() < deadline, f"{key} is {d.status}, not {statuses}"
            await asyncio.sleep(0.02)


@pytest.fixture
async def env(db_url: str, tmp_path: Path) -> AsyncIterator[Env]:
    flag = tmp_path / "courier-back"
    manager = console_app.build(db_url, flag)
    async with manager:
        with console(db_url) as ui:
            yield Env(manager, ui, flag, db_url)


S = sw.WorkflowStatus


async def test_list_counts_filters_and_keyset_pages(env: Env) -> None:
    for i in range(5):
        await env.start("simple", f"order-{i}")
    await env.start("flaky", "ship-1")
    for i in range(5):
        await env.wait_for(f"order-{i}", S.COMPLETED)
    await env.wait_for("ship-1", S.SUSPENDED)

    page = (await env.ui.get("/")).text
    assert count_of(page, "total") == 6
    assert count_of(page, "COMPLETED") == 5 and count_of(page, "SUSPENDED") == 1
    assert count_of(page, "FAILED") == 0
    assert 'href="/workflows/ship-1"' in page
    keys = re.findall(r'href="/workflows/([^"]+)"', page)
    assert keys == ["ship-1", "order-4", "order-3", "order-2", "order-1", "order-0"]  # newest first

    suspended = (await env.ui.get("/?status=SUSPENDED")).text
    assert re.findall(r'href="/workflows/([^"]+)"', suspended) == ["ship-1"]
    by_name = (await env.ui.get("/?name=simple&key_prefix=order-")).text
    assert len(re.findall(r'href="/workflows/order-', by_name)) == 5
    assert "ship-1" not in by_name
    assert "order-" not in (await env.ui.get("/?since=2099-01-01")).text.split("<tbody>")[1]
    recent = (await env.ui.get("/?since=1h&until=2099-01-01T00:00")).text
    assert len(re.findall(r'href="/workflows/', recent)) == 6
    bad = await env.ui.get("/?since=yesterday-ish")
    assert bad.status_code == 400 and "yesterday-ish" in html.unescape(bad.text)

    # Keyset pages of two, by following each page's "next page" link, see every row once.
    seen: list[str] = []
    path: str | None = "/?limit=2"
    while path is not None:
        page = (await env.ui.get(path)).text
        seen += re.findall(r'href="/workflows/([^"]+)"', page)
        nxt = re.search(r'rel="next" href="([^"]+)"', page)
        path = html.unescape(nxt.group(1)) if nxt else None
    assert seen == keys

    live = (await env.ui.get("/fragments/list?status=COMPLETED")).text
    assert "<html" not in live and count_of(live, "COMPLETED") == 5


async def test_workflow_page_shows_error_steps_signals_and_relations(env: Env) -> None:
    await env.start("flaky", "ship-2", "crate")
    await env.start("held", "hold-1")
    await env.start("family", "parent-1")
    await env.wait_for("ship-2", S.SUSPENDED)
    await env.wait_for("hold-1", S.WAITING)
    parent = await env.wait_for("parent-1", S.COMPLETED)
    await env.manager.signal("approval").send("hold-1", {"ok": "perhaps"})
    await env.manager.signal("other").send("hold-1", {"note": 1})

    page = (await env.ui.get("/workflows/ship-2")).text
    text = text_of(page)
    assert 'id="last-error"' in page and "courier offline: no route for crate" in text
    assert "SUSPENDED" in text and "Retry now" in text
    assert "#1" in text and "book" in text and "deliver" in text and "booking of crate" in text
    assert '"item": "crate"' in text  # the input
    assert "attempt" in text

    d = await env.manager.get_workflow("hold-1").describe()
    deadline = time.monotonic() + 30
    while not any(s.state == "rejected" for s in d.signals):
        assert time.monotonic() < deadline
        await asyncio.sleep(0.02)
        d = await env.manager.get_workflow("hold-1").describe()
    text = text_of((await env.ui.get("/workflows/hold-1")).text)
    assert "rejected" in text and "Approval" in text and "pending" in text
    assert "waiting for signal:approval" in text

    child = parent.children[0]
    page = (await env.ui.get("/workflows/parent-1")).text
    assert f'href="/workflows/{quote(child)}"' in page and "approved" not in page
    child_page = (await env.ui.get(f"/workflows/{quote(child)}")).text
    assert 'href="/workflows/parent-1"' in child_page
    assert '"booking of parcel"' in text_of(page)  # the result

    fragment = (await env.ui.get("/fragments/workflow/ship-2")).text
    assert "<html" not in fragment and "courier offline" in fragment


async def test_retry_resumes_a_workflow_whose_cause_is_fixed(env: Env) -> None:
    await env.start("flaky", "ship-3")
    await env.start("simple", "done-3")
    await env.wait_for("ship-3", S.SUSPENDED)
    await env.wait_for("done-3", S.COMPLETED)
    env.flag.touch()
    page = await env.ui.act_and_follow("retry", "ship-3")
    assert "ship-3: will be retried by the next worker scan" in text_of(page)
    d = await env.wait_for("ship-3", S.COMPLETED)
    assert d.result == "parcel delivered"
    assert "flash" not in (await env.ui.get("/workflows/ship-3")).text  # shown once

    refused = await env.ui.act_and_follow("retry", "done-3")
    assert "done-3 is COMPLETED, not SUSPENDED: nothing to retry" in text_of(refused)


async def test_cancel_compensates_and_terminate_does_not(env: Env) -> None:
    await env.start("held", "hold-2")
    await env.start("held", "hold-3")
    await env.wait_for("hold-2", S.WAITING)
    await env.wait_for("hold-3", S.WAITING)

    page = await env.ui.act_and_follow("cancel", "hold-2", reason="customer changed mind")
    assert "hold-2: cancel requested" in text_of(page)
    d = await env.wait_for("hold-2", S.CANCELLED)
    assert [s.name for s in d.steps if s.kind is sw.StepKind.COMPENSATION] == ["unbook"]
    text = text_of((await env.ui.get("/workflows/hold-2")).text)
    assert "CANCELLED" in text and "compensation" in text and "↩" in text
    assert "Cancel…" not in text  # ended: no actions left

    page = await env.ui.act_and_follow("terminate", "hold-3", reason="duplicate order")
    assert "TERMINATED (duplicate order)" in text_of(page)
    d = await env.wait_for("hold-3", S.TERMINATED)
    assert not any(s.kind is sw.StepKind.COMPENSATION for s in d.steps)
    again = await env.ui.act_and_follow("cancel", "hold-3")
    assert "hold-3 had already ended (TERMINATED)" in text_of(again)


async def test_signal_action_delivers_and_malformed_json_sends_nothing(env: Env) -> None:
    await env.start("held", "hold-4")
    await env.wait_for("hold-4", S.WAITING)

    bad = await env.ui.act("signal", "hold-4", name="approval", payload='{"ok": tru')
    assert bad.status_code == 400
    assert "the payload is not JSON" in text_of(bad.text) and "nothing was sent" in bad.text
    assert '{"ok": tru' in html.unescape(bad.text)  # kept in the form to fix
    assert (await env.manager.get_workflow("hold-4").describe()).signals == []

    page = await env.ui.act_and_follow(
        "signal", "hold-4", name="approval", payload='{"ok": true, "by": "ops"}'
    )
    assert "hold-4: signal 'approval' sent" in text_of(page)
    d = await env.wait_for("hold-4", S.COMPLETED)
    assert d.result == "approved by ops"
    ended = await env.ui.act_and_follow("signal", "hold-4", name="approval", payload="null")
    assert "not sent" in text_of(ended)


async def test_refuses_forged_posts_escapes_payloads_and_404s(env: Env) -> None:
    key = "<script>alert(1)</script>/x?y#z"
    await env.manager.workflow("held", "<script>alert(2)</script>").execute(idempotency_key=key)
    await env.wait_for(key, S.WAITING)
    path = f"/actions/cancel/{quote(key)}"

    token = await env.ui.csrf(path)
    for data, headers in (
        ({}, {"Origin": BASE}),  # no CSRF field
        ({"csrf": "0" * 64}, {"Origin": BASE}),  # a wrong one
        ({"csrf": token}, {"Origin": "http://evil.example"}),  # another site's form
        ({"csrf": token}, {}),  # neither Origin nor Referer
    ):
        refused = await env.ui.post(path, data=data, headers=headers, follow_redirects=False)
        assert refused.status_code == 403, (data, headers)
    referer = await env.ui.post(
        path, data={"csrf": token}, headers={"Referer": f"{BASE}{path}"}, follow_redirects=False
    )
    assert referer.status_code == 303  # the Referer names this host: accepted
    await env.wait_for(key, S.CANCELLED)

    for page in ((await env.ui.get(f"/workflows/{quote(key)}")).text, (await env.ui.get("/")).text):
        assert "<script>alert" not in page
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert (
        "&lt;script&gt;alert(2)&lt;/script&gt;"
        in (await env.ui.get(f"/workflows/{quote(key)}")).text
    )

    # DNS rebinding: a page of another name pointed at 127.0.0.1 gets nothing without a token.
    rebound = await env.ui.get("/", headers={"Host": "evil.example:8080"})
    assert rebound.status_code == 421 and "order" not in rebound.text
    for host in ("localhost:8080", "[::1]:8080", "127.0.0.2"):
        assert (await env.ui.get("/", headers={"Host": host})).status_code == 200

    missing = await env.ui.get("/workflows/no-such-key")
    assert missing.status_code == 404 and "No such workflow" in missing.text
    assert (await env.ui.get("/actions/retry/no-such-key")).status_code == 404
    assert (await env.ui.get("/actions/explode/x")).status_code == 404
    headers = missing.headers
    assert "frame-ancestors 'none'" in headers["content-security-policy"]
    assert "default-src 'self'" in headers["content-security-policy"]
    assert headers["x-content-type-options"] == "nosniff"


async def test_token_and_read_only(env: Env) -> None:
    await env.start("held", "hold-5")
    await env.wait_for("hold-5", S.WAITING)

    with console(env.url, token="s3cret-token") as guarded:
        plain = await guarded.get("/workflows/hold-5", headers={"Accept": "application/json"})
        assert plain.status_code == 401 and "hold-5" not in plain.text
        browser = await guarded.get("/", headers={"Accept": "text/html"}, follow_redirects=False)
        assert browser.status_code == 303 and browser.headers["location"].startswith("/login")
        assert (await guarded.get("/fragments/list")).status_code == 401
        wrong = await guarded.get("/", headers={"Authorization": "Bearer nope"})
        assert wrong.status_code in (303, 401) and "hold-5" not in wrong.text
        bearer = await guarded.get("/", headers={"Authorization": "Bearer s3cret-token"})
        assert bearer.status_code == 200 and "hold-5" in bearer.text
        named = {"Authorization": "Bearer s3cret-token", "Host": "console.example:8080"}
        assert (await guarded.get("/", headers=named)).status_code == 200  # any name, with it

        token = await guarded.csrf("/login")
        form = {"csrf": token, "token": "guess", "next": "/workflows/hold-5"}
        failed = await guarded.post("/login", data=form, headers={"Origin": BASE})
        assert failed.status_code == 401 and "wrong token" in failed.text
        form["token"] = "s3cret-token"
        ok = await guarded.post(
            "/login", data=form, headers={"Origin": BASE}, follow_redirects=False
        )
        assert ok.status_code == 303 and ok.headers["location"] == "/workflows/hold-5"
        cookie = ok.headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "s3cret" not in cookie
        assert "hold-5" in (await guarded.get("/workflows/hold-5")).text

    with console(env.url, read_only=True) as viewer:
        page = (await viewer.get("/workflows/hold-5")).text
        assert "hold-5" in page and "/actions/" not in page
        assert (await viewer.get("/actions/cancel/hold-5")).status_code == 403
        refused = await viewer.post(
            "/actions/cancel/hold-5",
            data={"csrf": await viewer.csrf("/login")},
            headers={"Origin": BASE},
            follow_redirects=False,
        )
        assert refused.status_code == 403 and "read-only" in refused.text
    assert (await env.manager.get_workflow("hold-5").status()) is S.WAITING


async def test_metrics_show_the_database_counts_and_need_the_token(env: Env) -> None:
    from sagaway.telemetry import metrics

    for i in range(3):
        await env.start("simple", f"m-{i}")
    await env.start("flaky", "m-broken")
    for i in range(3):
        await env.wait_for(f"m-{i}", S.COMPLETED)
    await env.wait_for("m-broken", S.SUSPENDED)
    try:
        scrape = await env.ui.get("/metrics")
        assert scrape.status_code == 200
        assert scrape.headers["content-type"].startswith("text/plain")
        assert 'sagaway_workflows{status="COMPLETED"} 3.0' in scrape.text
        assert 'sagaway_workflows{status="SUSPENDED"} 1.0' in scrape.text
        assert 'sagaway_workflows{status="WAITING"} 0.0' in scrape.text
        with console(env.url, token="s3cret-token") as guarded:
            assert (await guarded.get("/metrics")).status_code == 401
            bearer = {"Authorization": "Bearer s3cret-token"}
            assert (await guarded.get("/metrics", headers=bearer)).status_code == 200
    finally:
        metrics.disable_metrics()


@pytest.mark.parametrize(
    "url",
    [
        "sqlite:///{tmp}/missing/sagaway.db",
        pytest.param("postgresql://postgres@127.0.0.1:1/none", id="postgres-down"),
        pytest.param("grpc://127.0.0.1:1", id="server-down"),
    ],
)
def test_an_unreachable_database_gives_a_503_page_and_the_console_keeps_running(
    url: str, tmp_path: Path
) -> None:
    if url.startswith("postgres"):
        pytest.importorskip("psycopg")
    with console(url.format(tmp=tmp_path)) as ui:
        for _ in range(2):  # and again: it stays up, trying each request
            page = ui.client.get("/")
            assert page.status_code == 503 and "Database unavailable" in page.text
            assert "keeps running" in page.text
        for path in ("/paused", "/workflows/k?outputs=1000"):  # the newer pages alike
            page = ui.client.get(path)
            assert page.status_code == 503 and "Database unavailable" in page.text
