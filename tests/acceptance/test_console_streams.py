"""The console's workflow page shows what a running workflow publishes, in a real browser
(headless Chromium, ``sagaway ui`` and ``sagaway worker`` as processes, SQLite and PostgreSQL):
its search attributes, each event's latest value, and a stream that grows on screen as the
workflow writes it (no reload: the page's live part). The list filters by search attributes,
and a signal batch from it reaches exactly the workflows they select."""

from __future__ import annotations

import asyncio
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import sagaway as sw
from tests.acceptance.console_support import Child, chromium, require_browser, ui_process
from tests.conftest import _fresh_postgres_url

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.long]
WAIT = 30.0


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def site(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, str]]:
    require_browser()
    urls: Iterator[str]
    urls = (
        iter([f"sqlite:///{tmp_path}/sagaway.db"])
        if request.param == "sqlite"
        else (_fresh_postgres_url())
    )
    for url in urls:
        asyncio.run(_client(url, lambda m: asyncio.sleep(0)))  # create the database
        worker = Child(
            ["worker", "tests.integration.streams_console_app:manager", "--db", url],
            tmp_path / "worker.log",
        )
        try:
            with ui_process(url, tmp_path / "ui.log") as base:
                yield url, base
        finally:
            worker.stop()


async def _client(url: str, action: Any) -> Any:
    async with sw.Manager(url).connect() as manager:
        return await action(manager)


def _waiter(driver: Any) -> Any:
    from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
    from selenium.webdriver.support.ui import WebDriverWait

    stale = (StaleElementReferenceException, NoSuchElementException)
    return WebDriverWait(driver, WAIT, poll_frequency=0.1, ignored_exceptions=stale)


def _texts(driver: Any, css: str) -> list[str]:
    return [str(e.text) for e in driver.find_elements("css selector", css)]


def _wait_texts(driver: Any, css: str, expected: list[str]) -> None:
    _waiter(driver).until(lambda d: _texts(d, css) == expected)


def test_the_workflow_page_follows_a_stream_and_shows_events_and_attributes(
    site: tuple[str, str],
) -> None:
    url, base = site
    words = ["Hel", "lo", " world"]

    async def start(m: sw.Manager) -> None:
        await m.start_by_name("chat", {"customer": "4711", "words": words}, idempotency_key="c-1")
        await m.start_by_name("chat", {"customer": "1", "words": ["x"]}, idempotency_key="c-2")

    asyncio.run(_client(url, start))
    with chromium() as driver:
        driver.get(f"{base}/workflows/c-1")
        _wait_texts(driver, ".stream-item", ['"Hel"'])
        assert _texts(driver, "#search-attributes .attr-customer") == ["4711"]
        _wait_texts(driver, "#events .event-value", ['"writing"'])
        page = driver.execute_script("return performance.timeOrigin")
        for n in (1, 2):
            asyncio.run(
                _client(url, lambda m, n=n: m.signal("next").send("c-1", None, dedupe_id=str(n)))
            )
            _wait_texts(driver, ".stream-item", ['"Hel"', '"lo"', '" world"'][: n + 1])
        _wait_texts(driver, "#events .event-value", ['"done"'])
        # The same page all along: the stream grew by the live refresh, not a reload.
        assert driver.execute_script("return performance.timeOrigin") == page
        driver.get(f"{base}/?{urllib.parse.urlencode({'where': 'customer=4711'})}")
        _waiter(driver).until(
            lambda d: "c-1" in str(d.execute_script("return document.body.innerText"))
        )
        text = str(driver.execute_script("return document.body.innerText"))
        assert "c-2" not in text
        assert driver.find_element("id", "filter-where").get_attribute("value") == "customer=4711"


def test_a_signal_batch_selected_by_a_search_attribute(site: tuple[str, str]) -> None:
    url, base = site

    async def start(m: sw.Manager) -> None:
        for key, customer in (("s-1", "4711"), ("s-2", "1")):
            await m.start_by_name("chat", {"customer": customer, "words": ["a", "b"]},
                                  idempotency_key=key)  # fmt: skip
        for key in ("s-1", "s-2"):
            for _ in range(1500):  # the worker sets them: wait for them to be there
                if await m.get_workflow(key).search_attributes():
                    break
                await asyncio.sleep(0.02)
            else:
                raise AssertionError(f"{key} set no search attribute")

    asyncio.run(_client(url, start))
    with chromium() as driver:
        driver.get(f"{base}/?{urllib.parse.urlencode({'where': 'customer=4711'})}")
        driver.find_element("id", "batch-signal").click()
        _waiter(driver).until(
            lambda d: "1 of the 1 selected" in d.find_element("id", "batch-count").text
        )
        assert "where=['customer=4711']" in driver.find_element("id", "batch-filter").text
        driver.find_element("name", "name").send_keys("next")
        driver.find_element("id", "confirm").click()
        _waiter(driver).until(
            lambda d: (
                "batch signal: 1 selected, 1 done" in d.find_element("css selector", ".flash").text
            )
        )

    async def results(m: sw.Manager) -> tuple[Any, sw.WorkflowStatus]:
        return await m.get_workflow("s-1").result(timeout=WAIT), await m.get_workflow(
            "s-2"
        ).status()

    assert asyncio.run(_client(url, results)) == (2, sw.WorkflowStatus.WAITING)
