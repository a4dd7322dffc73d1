"""What an operator does from the console's buttons in a real browser (headless Chromium under
Selenium, ``sagaway ui`` and ``sagaway worker`` as processes, on SQLite and PostgreSQL): send an
update and read its answer (rejected with the reason, accepted with the result), pause and
resume a workflow, pause and resume an activity from the page of paused calls, send a signal
to every workflow the list selects, and page through more than 1,000 stream items."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import sagaway as sw
from tests.acceptance.test_console_browser import (  # noqa: F401 (fixtures)
    Site,
    _click,
    _text,
    _wait_text,
    browser,
    site,
)

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.long]
S = sw.WorkflowStatus


def _fill(driver: Any, name: str, text: str) -> None:
    field = driver.find_element("name", name)
    field.clear()
    field.send_keys(text)


def _manager_call(at: Site, call: Any) -> Any:
    async def go() -> Any:
        async with sw.Manager(at.url).connect() as manager:
            return await call(manager)

    return asyncio.run(go())


def test_send_an_update_and_read_its_answer(site: Site, browser: Any) -> None:  # noqa: F811
    site.start("approvals", "bo-upd-1")
    site.wait_for("bo-upd-1", S.WAITING)
    browser.get(site.page("bo-upd-1"))
    _click(browser, "id", "action-update")
    _fill(browser, "name", "approve")
    _fill(browser, "payload", "-3")
    _click(browser, "id", "confirm")
    _wait_text(browser, "#update-outcome", "Update rejected")
    assert "amount -3 is not positive" in _text(browser)
    _fill(browser, "payload", "21")
    _click(browser, "id", "confirm")
    _wait_text(browser, "#update-outcome", "Update accepted")
    assert browser.find_element("id", "update-answer").text.strip() == "42"
    d = site.wait_for("bo-upd-1", S.COMPLETED)
    assert d.result == 42


def test_pause_and_resume_a_workflow(site: Site, browser: Any) -> None:  # noqa: F811
    site.start("held", "bo-pause-1")
    site.wait_for("bo-pause-1", S.WAITING)
    browser.get(site.page("bo-pause-1"))
    _click(browser, "id", "action-pause")
    _fill(browser, "reason", "courier on strike")
    _click(browser, "id", "confirm")
    _wait_text(browser, ".flash", "bo-pause-1: paused")
    _wait_text(browser, "#paused", "paused")
    _click(browser, "id", "action-resume")
    _click(browser, "id", "confirm")
    _wait_text(browser, ".flash", "bo-pause-1: resumed")
    assert browser.find_elements("id", "paused") == []
    entries = _manager_call(site, lambda m: m.audit_log(key="bo-pause-1"))
    assert [(e.action, e.reason) for e in entries][-1] == ("pause", "courier on strike")


def test_pausing_an_activity_from_the_paused_page(site: Site, browser: Any) -> None:  # noqa: F811
    browser.get(site.base + "/")
    _click(browser, "id", "nav-paused")
    _fill(browser, "name", "deliver")
    _fill(browser, "reason", "courier API down")
    _click(browser, "id", "pause-submit")
    _wait_text(browser, ".flash", "activity 'deliver' paused")
    _wait_text(browser, "#paused-calls", "courier API down")
    paused = _manager_call(site, lambda m: m.paused_calls())
    assert [(c.kind, c.name, c.reason) for c in paused] == [
        ("activity", "deliver", "courier API down")
    ]
    _click(browser, "id", "resume-activity-deliver")
    _wait_text(browser, ".flash", "activity 'deliver' resumed")
    _wait_text(browser, "#nothing-paused", "Nothing is paused")
    assert _manager_call(site, lambda m: m.paused_calls()) == []


def test_a_signal_batch_from_the_filtered_list(site: Site, browser: Any) -> None:  # noqa: F811
    for key in ("bs-1", "bs-2", "bt-1"):
        site.start("held", key)
    for key in ("bs-1", "bs-2", "bt-1"):
        site.wait_for(key, S.WAITING)
    browser.get(site.base + "/?key_prefix=bs-")
    _click(browser, "id", "batch-signal")
    _wait_text(browser, "#batch-count", "2 of the 2 selected workflows would be acted on")
    _fill(browser, "name", "approval")
    _fill(browser, "payload", '{"ok": true, "by": "the night shift"}')
    _click(browser, "id", "confirm")
    _wait_text(browser, ".flash", "batch signal: 2 selected, 2 done")
    for key in ("bs-1", "bs-2"):
        assert site.wait_for(key, S.COMPLETED).result == "approved by the night shift"
    site.wait_for("bt-1", S.WAITING)


def test_over_a_thousand_stream_items_page_by_page(site: Site, browser: Any) -> None:  # noqa: F811
    site.start("chatty", "bo-chatty-1", "2300")
    site.wait_for("bo-chatty-1", S.COMPLETED)
    browser.get(site.page("bo-chatty-1"))
    _wait_text(browser, "#outputs-range", "outputs 1 to 1000")
    assert browser.find_elements("id", "outputs-older") == []
    items = browser.find_elements("css selector", ".stream-item")
    assert (len(items), items[0].text, items[-1].text) == (999, '"n0"', '"n998"')
    _click(browser, "id", "outputs-newer")
    _wait_text(browser, "#outputs-range", "outputs 1001 to 2000")
    _click(browser, "id", "outputs-newer")
    _wait_text(browser, "#outputs-range", "outputs 2001 to 2302")
    assert browser.find_elements("id", "outputs-newer") == []
    items = browser.find_elements("css selector", ".stream-item")
    assert (items[0].text, items[-1].text) == ('"n1999"', '"n2299"')
    _wait_text(browser, "#events .event-value", '"done"')
    _click(browser, "id", "outputs-older")
    _wait_text(browser, "#outputs-range", "outputs 1001 to 2000")
