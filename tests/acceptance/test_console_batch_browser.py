"""A batch cancel from the console's workflow list in a real browser (headless Chromium under
Selenium, ``sagaway ui`` and ``sagaway worker`` as processes, on SQLite and PostgreSQL): filter
the list, open the batch, read the dry run, confirm, and see the summary and the cancelled
workflows compensated."""

from __future__ import annotations

from typing import Any

import pytest

import sagaway as sw
from tests.acceptance.test_console_browser import (  # noqa: F401 (fixtures)
    Site,
    _click,
    _wait_text,
    browser,
    site,
)

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.long]
S = sw.WorkflowStatus


def test_batch_cancel_from_the_filtered_list(site: Site, browser: Any) -> None:  # noqa: F811
    for key in ("bb-hold-1", "bb-hold-2", "bc-hold-3"):
        site.start("held", key)
    for key in ("bb-hold-1", "bb-hold-2", "bc-hold-3"):
        site.wait_for(key, S.WAITING)
    browser.get(site.base + "/?key_prefix=bb-")
    _click(browser, "id", "batch-cancel")
    _wait_text(browser, "#batch-count", "2 of the 2 selected workflows would be acted on")
    sample = _wait_text(browser, "#batch-sample", "bb-hold-1")
    assert "bb-hold-2" in sample and "bc-hold-3" not in sample
    _click(browser, "id", "confirm")
    _wait_text(browser, ".flash", "batch cancel: 2 selected, 2 done")
    for key in ("bb-hold-1", "bb-hold-2"):
        d = site.wait_for(key, S.CANCELLED)
        assert any(s.kind is sw.StepKind.COMPENSATION for s in d.steps)
    site.wait_for("bc-hold-3", S.WAITING)
