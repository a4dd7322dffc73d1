"""The console's update, pause and resume of a workflow, its page of paused activities and
queues, a signal batch filtered by search attributes, and the pages of a workflow's outputs,
through Starlette's TestClient on every backend (the Engine Server's too)."""

from __future__ import annotations

import re
import urllib.parse
from typing import Any

import pytest

import sagaway as sw

pytest.importorskip("starlette", reason="the [ui] extra is part of the dev install")

from sagaway.console.views import updates
from tests.integration import batch_app
from tests.integration.test_batch_attributes import tag
from tests.integration.test_console import BASE, Env, console, env  # noqa: F401 (fixture)
from tests.integration.test_console import text_of as tags_dropped

S = sw.WorkflowStatus


def text_of(page: str) -> str:
    return " ".join(tags_dropped(page).split())


async def post(site: Env, path: str, **fields: str) -> Any:
    token = await site.ui.csrf(path if path.startswith("/actions") else "/paused")
    return await site.ui.post(
        path, data={"csrf": token, **fields}, headers={"Origin": BASE}, follow_redirects=False
    )


async def test_an_update_is_answered_on_the_form(env: Env) -> None:  # noqa: F811
    await env.start("approvals", "upd-1")
    await env.wait_for("upd-1", S.WAITING)
    assert 'id="action-update"' in (await env.ui.get("/workflows/upd-1")).text
    form = (await env.ui.get("/actions/update/upd-1")).text
    first = re.search(r'name="update_id" value="(console-[0-9a-f]{32})"', form)
    assert first is not None

    bad = await post(env, "/actions/update/upd-1", name="approve", payload="{oops")
    assert bad.status_code == 400 and "the payload is not JSON" in text_of(bad.text)
    nameless = await post(env, "/actions/update/upd-1", name=" ", payload="1")
    assert nameless.status_code == 400 and "give the update's name" in text_of(nameless.text)

    no = await post(env, "/actions/update/upd-1", name="approve", payload="-3")
    assert no.status_code == 200
    said = text_of(no.text)
    assert "Update rejected" in said and "amount -3 is not positive" in said
    assert 'data-outcome="rejected"' in no.text
    yes = await post(
        env, "/actions/update/upd-1", name="approve", payload="21", update_id="console-again"
    )
    assert 'data-outcome="accepted"' in yes.text
    assert re.search(r'id="update-answer">\s*42\s*<', yes.text)
    await env.wait_for("upd-1", S.COMPLETED)
    # The same form again (a reload): the same update, the same answer, applied once.
    again = await post(
        env, "/actions/update/upd-1", name="approve", payload="21", update_id="console-again"
    )
    assert 'data-outcome="accepted"' in again.text and "42" in text_of(again.text)
    assert await env.manager.get_workflow("upd-1").result() == 42
    # Each update the console sent is in the audit trail, as the signal it travels as.
    sent = await env.manager.audit_log(key="upd-1", action="signal")
    assert {e.details.get("signal") for e in sent} == {"update:approve"}
    ids = {str(e.details.get("dedupe_id")) for e in sent} - {"console-again"}
    assert len(sent) == 2 and len(ids) == 1 and ids.pop().startswith("console-")  # rejected


async def test_an_update_not_answered_in_time_stays_pending(
    env: Env,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(updates, "WAIT", 0.2)  # the console's wait for an answer
    await env.start("held", "pend-1")  # it answers no update: it waits for a signal
    await env.wait_for("pend-1", S.WAITING)
    pending = await post(env, "/actions/update/pend-1", name="approve", payload="1")
    assert pending.status_code == 200 and 'data-outcome="pending"' in pending.text
    said = text_of(pending.text)
    assert "no answer within 0.2 s: the update (console-" in said and "stays pending" in said
    update_id = re.search(r"the update \((console-[0-9a-f]{32})\)", said)
    assert update_id is not None  # and the form keeps it, to look again with the same update
    assert f'name="update_id" value="{update_id.group(1)}"' in pending.text
    signals = await env.manager.list_signals("pend-1")
    assert [(x.name, x.dedupe_id, x.consumed_call) for x in signals] == [
        ("update:approve", update_id.group(1), None)
    ]


async def test_pause_and_resume_from_the_workflow_page(env: Env) -> None:  # noqa: F811
    await env.start("held", "p-1")
    await env.wait_for("p-1", S.WAITING)
    page = (await env.ui.get("/workflows/p-1")).text
    assert 'id="action-pause"' in page and 'id="action-resume"' not in page
    done = await post(env, "/actions/pause/p-1", reason="checking the courier")
    assert done.status_code == 303
    shown = text_of((await env.ui.get(done.headers["location"])).text)
    assert "p-1: paused" in shown
    assert (await env.manager.get_workflow("p-1").describe()).paused
    page = (await env.ui.get("/workflows/p-1")).text
    assert 'id="action-resume"' in page and 'id="action-pause"' not in page
    await post(env, "/actions/resume/p-1")
    assert not (await env.manager.get_workflow("p-1").describe()).paused
    entries = await env.manager.audit_log(key="p-1")
    assert [e.action for e in entries if e.action in ("pause", "resume")] == ["resume", "pause"]
    assert "checking the courier" in {e.reason for e in entries}
    again = await post(env, "/actions/resume/p-1")
    flashed = text_of((await env.ui.get(again.headers["location"])).text)
    assert "p-1 was not paused (WAITING)" in flashed
    await env.manager.terminate("p-1")
    ended = await post(env, "/actions/pause/p-1")
    flashed = text_of((await env.ui.get(ended.headers["location"])).text)
    assert "p-1 was not paused: it has ended (TERMINATED)" in flashed


async def test_the_page_of_paused_activities_and_queues(env: Env) -> None:  # noqa: F811
    assert "Nothing is paused" in text_of((await env.ui.get("/paused")).text)
    done = await post(env, "/paused", op="pause", kind="activity", name="deliver", reason="x")
    assert done.status_code == 303 and done.headers["location"] == "/paused"
    await post(env, "/paused", op="pause", kind="queue", name="payments")
    listed = text_of((await env.ui.get("/paused")).text)
    assert "queue 'payments' paused" in listed
    assert "deliver" in listed and "payments" in listed and "paused from the web console" in listed
    calls = {(c.kind, c.name) for c in await env.manager.paused_calls()}
    assert calls == {("activity", "deliver"), ("queue", "payments")}
    again = await post(env, "/paused", op="pause", kind="activity", name="deliver")
    said = text_of((await env.ui.get(again.headers["location"])).text)
    assert "activity 'deliver' was paused already: nothing changed" in said
    await post(env, "/paused", op="resume", kind="activity", name="deliver")
    assert [(c.kind, c.name) for c in await env.manager.paused_calls()] == [("queue", "payments")]
    assert (await post(env, "/paused", op="pause", kind="table", name="x")).status_code == 400
    assert (await post(env, "/paused", op="explode", kind="queue", name="x")).status_code == 400
    with console(env.url, read_only=True) as viewer:
        assert 'id="pause-form"' not in (await viewer.get("/paused")).text
        token = await viewer.csrf("/login")
        refused = await viewer.post(
            "/paused",
            data={"csrf": token, "op": "resume", "kind": "queue", "name": "payments"},
            headers={"Origin": BASE},
        )
        assert refused.status_code == 403
    assert len(await env.manager.paused_calls()) == 1


async def test_a_signal_batch_by_search_attributes(db_url: str) -> None:
    m = batch_app.build(db_url)
    async with m:
        await tag(m)
        with console(db_url) as ui:
            query = urllib.parse.urlencode({"where": "amount>=100, vip=true"})
            listed = (await ui.get(f"/?{query}")).text
            assert f'href="/batch/signal?{query}"' in listed
            path = f"/batch/signal?{query}"
            page = await ui.get(path)
            assert page.status_code == 200, page.text
            said = text_of(page.text)
            assert "2 of the 2 selected workflows would be acted on" in said
            assert "where=['amount>=100', 'vip=true']" in said
            token = await ui.csrf(path)

            async def send(**fields: str) -> Any:
                return await ui.post(
                    path,
                    data={"csrf": token, **fields},
                    headers={"Origin": BASE},
                    follow_redirects=False,
                )

            bad = await send(name="go", payload="{oops")
            assert bad.status_code == 400 and "the payload is not JSON" in text_of(bad.text)
            assert (await send(name="", payload="1")).status_code == 400
            done = await send(name="go", payload='"from the console"', dedupe_id="d-1")
            assert done.status_code == 303
            summary = text_of((await ui.get(done.headers["location"])).text)
            assert "batch signal: 2 selected, 2 done" in summary
            for key in ("t-1", "t-3"):
                assert await m.get_workflow(key).result(timeout=15) == "from the console"
            assert await m.get_workflow("t-2").status() is S.WAITING
            assert (await ui.get("/batch/cancel?where=amount")).status_code == 400


async def test_every_output_is_reachable_page_by_page(env: Env) -> None:  # noqa: F811
    await env.start("chatty", "ch-1", "2300")
    await env.wait_for("ch-1", S.COMPLETED)
    first = (await env.ui.get("/workflows/ch-1")).text
    assert "outputs 1 to 1000" in text_of(first) and 'id="outputs-older"' not in first
    seen = re.findall(r'data-offset="(\d+)"', first)
    newer = re.search(r'id="outputs-newer" href="([^"]+)"', first)
    pages = 1
    while newer is not None:
        page = (await env.ui.get(newer.group(1).replace("&amp;", "&"))).text
        pages += 1
        assert 'id="outputs-older"' in page
        seen += re.findall(r'data-offset="(\d+)"', page)
        newer = re.search(r'id="outputs-newer" href="([^"]+)"', page)
        last = page
    assert pages == 3 and [int(o) for o in seen] == list(range(2300))
    assert "outputs 2001 to 2302" in text_of(last)
    assert re.search(r'class="code code-sm event-value">"done"<', last)
    fragment = (await env.ui.get("/fragments/workflow/ch-1?outputs=1000")).text
    assert "outputs 1001 to 2000" in text_of(fragment)
    older = re.search(r'id="outputs-older" href="([^"]+)"', fragment)
    assert older is not None and older.group(1) == "/workflows/ch-1#outputs"
