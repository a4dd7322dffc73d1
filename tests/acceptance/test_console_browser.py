"""The web console in a real browser: ``sagaway ui`` and ``sagaway worker`` as processes,
headless Chromium driven by Selenium, on SQLite and PostgreSQL.

What an operator sees and does: the list's counts; a suspended workflow's last error; retry
after the cause is fixed (the page follows it to COMPLETED by itself); cancel, whose
compensation shows on the page; a key holding markup shown as text with no script run; and a
console listening beyond loopback serving nothing without its token.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import sagaway as sw
from tests.acceptance.console_support import (
    Child,
    chromium,
    require_browser,
    ui_process,
    worker_process,
)
from tests.conftest import _fresh_postgres_url
from tests.integration import console_app

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.long]
S = sw.WorkflowStatus
WAIT = 30.0


@dataclasses.dataclass
class Site:
    url: str
    base: str
    flag: Path
    tmp: Path

    def start(self, workflow: str, key: str, item: str = "parcel") -> None:
        async def go() -> None:
            async with console_app.build(self.url, self.flag).connect() as manager:
                await manager.workflow(workflow, item).execute(idempotency_key=key)

        asyncio.run(go())

    def wait_for(self, key: str, status: sw.WorkflowStatus) -> sw.WorkflowDescription:
        async def go() -> sw.WorkflowDescription:
            async with sw.Manager(self.url).connect() as manager:
                deadline = time.monotonic() + WAIT
                while True:
                    d = await manager.get_workflow(key).describe()
                    if d.status is status:
                        return d
                    assert time.monotonic() < deadline, f"{key} is {d.status}, not {status}"
                    await asyncio.sleep(0.05)

        return asyncio.run(go())

    def page(self, key: str) -> str:
        return f"{self.base}/workflows/{urllib.parse.quote(key, safe='')}"


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium() as driver:
        yield driver


@pytest.fixture(
    scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def site(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Site]:
    require_browser()
    tmp = tmp_path_factory.mktemp(f"console-{request.param}")
    if request.param == "sqlite":
        urls: Iterator[str] = iter([f"sqlite:///{tmp}/sagaway.db"])
    else:
        urls = _fresh_postgres_url()
    for url in urls:
        flag = tmp / "courier-back"
        asyncio.run(_create(url))
        with worker_process(url, tmp / "worker.log", flag), ui_process(url, tmp / "ui.log") as base:
            yield Site(url, base, flag, tmp)


async def _create(url: str) -> None:
    async with sw.Manager(url).connect():
        pass  # the database exists before the console and the worker open it


def _text(driver: Any) -> str:
    return str(driver.execute_script("return document.body.innerText"))


def _waiter(driver: Any) -> Any:
    """A wait that looks again when the page's live refresh replaced an element meanwhile."""
    from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
    from selenium.webdriver.support.ui import WebDriverWait

    stale = (StaleElementReferenceException, NoSuchElementException)
    return WebDriverWait(driver, WAIT, poll_frequency=0.1, ignored_exceptions=stale)


def _wait_text(driver: Any, css: str, text: str) -> str:
    """Wait until an element matching ``css`` shows ``text``; that element's text."""

    def shown(d: Any) -> str | None:
        found = [str(e.text) for e in d.find_elements("css selector", css)]
        return next((t for t in found if text in t), None)

    return str(_waiter(driver).until(shown, f"{css!r} never showed {text!r}"))


def _click(driver: Any, by: str, value: str) -> None:
    """Click the element (found again if a live refresh replaced it before the click)."""

    def clicked(d: Any) -> bool:
        d.find_element(by, value).click()
        return True

    _waiter(driver).until(clicked, f"cannot click {value!r}")


def test_counts_last_error_and_retry_to_completion(site: Site, browser: Any) -> None:
    site.start("simple", "b-order-1")
    site.start("simple", "b-order-2")
    site.start("flaky", "b-ship-1", "crate")
    site.wait_for("b-order-1", S.COMPLETED)
    site.wait_for("b-order-2", S.COMPLETED)
    site.wait_for("b-ship-1", S.SUSPENDED)

    browser.get(site.base + "/")
    pairs = browser.execute_script(  # in one go: the live refresh may replace them between reads
        "return Array.from(document.querySelectorAll('[data-status]'))"
        ".map(e => [e.dataset.status, e.textContent])"
    )
    counts = {status: int(n) for status, n in pairs}
    assert counts["COMPLETED"] >= 2 and counts["SUSPENDED"] == 1
    assert counts["total"] == sum(v for k, v in counts.items() if k != "total")

    _click(browser, "link text", "b-ship-1")
    _wait_text(browser, "#last-error", "courier offline: no route for crate")
    _wait_text(browser, "#status", "SUSPENDED")

    site.flag.touch()  # the cause is fixed
    _click(browser, "id", "action-retry")
    _click(browser, "id", "confirm")
    _wait_text(browser, ".flash", "b-ship-1: will be retried")
    _wait_text(browser, "#status", "COMPLETED")  # the page follows by itself (polling)
    _wait_text(browser, "#result", "crate delivered")


def test_cancel_shows_the_compensation(site: Site, browser: Any) -> None:
    site.start("held", "b-hold-1")
    site.wait_for("b-hold-1", S.WAITING)
    browser.get(site.page("b-hold-1"))
    assert "waiting for signal:approval" in _text(browser)
    _click(browser, "id", "action-cancel")
    _click(browser, "id", "confirm")
    _wait_text(browser, "#status", "CANCELLED")
    compensation = _wait_text(browser, ".tl-comp", "unbook")
    assert "↩" in compensation and "compensation" in compensation
    assert browser.find_elements("id", "action-cancel") == []


def test_updates_and_a_pause_show_on_the_workflow_page(site: Site, browser: Any) -> None:
    site.start("approvals", "b-upd-1")
    site.start("held", "b-pause-1")
    site.wait_for("b-upd-1", S.WAITING)
    site.wait_for("b-pause-1", S.WAITING)

    async def talk() -> None:
        async with sw.Manager(site.url).connect() as manager:
            handle = manager.get_workflow("b-upd-1")
            with pytest.raises(sw.UpdateRejected):
                await handle.update("approve", -3, update_id="no", timeout=WAIT)
            assert (await handle.update("approve", 21, update_id="yes", timeout=WAIT)).result == 42
            assert await manager.pause("b-pause-1", reason="checking the courier")

    asyncio.run(talk())
    site.wait_for("b-upd-1", S.COMPLETED)
    browser.get(site.page("b-upd-1"))
    _wait_text(browser, "#status", "COMPLETED")
    text = _text(browser)
    assert "approve:yes" in text and "update:approve" in text
    assert "amount -3 is not positive" in text  # the rejected request, with its reason
    browser.get(site.page("b-pause-1"))
    _wait_text(browser, "#paused", "paused")


def test_a_key_holding_markup_shows_as_text_and_runs_nothing(site: Site, browser: Any) -> None:
    from selenium.common.exceptions import NoAlertPresentException

    key = '<script>alert(1)</script><img src=x onerror="window.pwned=1">/k'
    site.start("simple", key, "<script>window.pwned=2</script>")
    site.wait_for(key, S.COMPLETED)
    for url in (site.base + "/?key_prefix=%3Cscript", site.page(key)):
        browser.get(url)
        assert key in _text(browser)
        assert browser.execute_script("return window.pwned === undefined") is True
        with pytest.raises(NoAlertPresentException):
            browser.switch_to.alert.text  # noqa: B018
    assert "<script>window.pwned=2</script>" in _text(browser)


def test_beyond_loopback_nothing_is_served_without_the_token(site: Site, browser: Any) -> None:
    site.start("simple", "b-secret-1")
    site.wait_for("b-secret-1", S.COMPLETED)
    refused = Child(["ui", "--db", site.url, "--listen", "0.0.0.0:0"], site.tmp / "refused.log")
    assert refused.proc.wait(30) == 2
    assert "without a token" in (site.tmp / "refused.log").read_text(encoding="utf-8")
    refused.stop()

    token_file = site.tmp / "ui-token"
    token_file.write_text("t0ken-for-the-browser-test\n", encoding="utf-8")
    options = ("--listen", "0.0.0.0:0", "--token-file", str(token_file))
    with ui_process(site.url, site.tmp / "guarded.log", *options) as base:
        port = urllib.parse.urlsplit(base).port
        local = f"http://127.0.0.1:{port}"
        with pytest.raises(urllib.error.HTTPError) as refusal:
            urllib.request.urlopen(f"{local}/workflows/b-secret-1", timeout=10)
        assert refusal.value.code == 401
        assert b"b-secret-1" not in refusal.value.read()
        bearer = urllib.request.Request(
            f"{local}/workflows/b-secret-1",
            headers={"Authorization": "Bearer t0ken-for-the-browser-test"},
        )
        with urllib.request.urlopen(bearer, timeout=10) as answer:
            assert b"b-secret-1" in answer.read()

        browser.get(f"{local}/login")
        browser.delete_all_cookies()  # cookies are per host, not per port: forget other runs'
        browser.get(f"{local}/workflows/b-secret-1")
        assert "/login" in browser.current_url and "b-secret-1" not in _text(browser)
        browser.find_element("name", "token").send_keys("wrong")
        _click(browser, "id", "login")
        _wait_text(browser, ".flash", "wrong token")
        assert "b-secret-1" not in _text(browser)
        browser.find_element("name", "token").send_keys("t0ken-for-the-browser-test")
        _click(browser, "id", "login")
        _wait_text(browser, "#status", "COMPLETED")
        assert browser.current_url == f"{local}/workflows/b-secret-1"


def test_a_line_and_a_burst_show_on_the_workflow_page(site: Site, browser: Any) -> None:
    async def start() -> None:
        async with console_app.build(site.url, site.flag).connect() as manager:
            for n in (1, 2):
                await manager.workflow("held", f"line-{n}").execute(
                    idempotency_key=f"b-line-{n}", ordering_key="b-account"
                )
            await manager.workflow("simple", "burst").execute(
                idempotency_key="b-burst-1", debounce_key="b-burst", debounce=3600
            )

    asyncio.run(start())
    site.wait_for("b-line-1", S.WAITING)  # the head waits: the line stays blocked behind it
    browser.get(site.page("b-line-2"))
    _wait_text(browser, "#ordering", "waits behind b-line-1 (1 ahead)")
    _wait_text(browser, "#status", "PENDING")
    browser.get(site.page("b-line-1"))
    _wait_text(browser, "#ordering", "first in line")
    browser.get(site.page("b-burst-1"))
    _wait_text(browser, "#debounce", "unless started again")
    assert "b-burst" in _text(browser)


def test_priority_and_fairness_key_are_shown(site: Site, browser: Any) -> None:
    async def start() -> None:
        async with console_app.build(site.url, site.flag).connect() as manager:
            await manager.workflow("simple", "parcel").execute(
                idempotency_key="b-urgent-1", priority=5, fairness_key="acme", fairness_weight=2
            )

    asyncio.run(start())
    site.wait_for("b-urgent-1", S.COMPLETED)
    browser.get(site.base + "/?key_prefix=b-urgent")
    _wait_text(browser, ".priority", "priority 5")
    _wait_text(browser, ".fairness-key", "acme")
    browser.get(site.page("b-urgent-1"))
    shown = _wait_text(browser, "dd.priority", "5 (1 lowest .. 5 highest)")
    assert "fairness key acme" in shown and "weight 2" in shown
