"""Batch actions from the console's workflow list, on every backend: the list links to them
only when a filter is set, the confirmation page is a dry run (nothing changes), the POST is
CSRF-checked and refused on a read-only console, and the batch acts on exactly the filtered
workflows, audited with the reason, then says what it did on the list."""

from __future__ import annotations

import re
from typing import Any

import pytest

import sagaway as sw

pytest.importorskip("starlette", reason="the [ui] extra is part of the dev install")

from tests.integration import batch_app
from tests.integration.test_batch import reaches, seed, statuses
from tests.integration.test_console import BASE, console
from tests.integration.test_console import text_of as tags_dropped

S = sw.WorkflowStatus


def text_of(page: str) -> str:
    """The page's words, one space apart."""
    return " ".join(tags_dropped(page).split())


async def test_batch_cancel_from_the_list(db_url: str) -> None:
    batch_app.released.clear()
    m = batch_app.build(db_url)
    async with m:
        await seed(m)
        before = await statuses(m)
        with console(db_url) as ui:
            plain = (await ui.get("/")).text
            assert 'id="batch-actions"' not in plain  # no filter: no batch
            listed = (await ui.get("/?key_prefix=eu-")).text
            assert 'href="/batch/cancel?key_prefix=eu-"' in listed

            page = await ui.get("/batch/cancel?key_prefix=eu-")
            assert page.status_code == 200, page.text
            text = text_of(page.text)
            assert "2 of the 2 selected workflows would be acted on" in text
            assert "eu-1" in text and "eu-2" in text and "us-1" not in text
            assert await statuses(m) == before  # the page is a dry run

            token = re.search(r'name="csrf" value="([0-9a-f]{64})"', page.text)
            assert token is not None
            path = "/batch/cancel?key_prefix=eu-"
            forged = await ui.post(path, data={"csrf": "0" * 64}, headers={"Origin": BASE})
            assert forged.status_code == 403 and await statuses(m) == before
            form: dict[str, Any] = {"csrf": token.group(1), "reason": "provider down"}
            done = await ui.post(path, data=form, headers={"Origin": BASE}, follow_redirects=False)
            assert done.status_code == 303 and done.headers["location"] == "/?key_prefix=eu-"
            after = text_of((await ui.get(done.headers["location"])).text)
            assert "batch cancel: 2 selected, 2 done" in after
            for key in ("eu-1", "eu-2"):
                await reaches(m, key, S.CANCELLED)
            assert (await statuses(m))["us-1"] is S.WAITING
            assert dict(batch_app.released) == {"eu-1": 1, "eu-2": 1}
            entries = await m.audit_log(action="cancel")
            assert sorted(e.target for e in entries) == ["eu-1", "eu-2"]
            assert {e.reason for e in entries} == {"provider down"}

            again = text_of((await ui.get("/batch/cancel?key_prefix=eu-")).text)
            assert "Nothing to do" in again

            assert (await ui.get("/batch/cancel")).status_code == 400  # no filter
            assert (await ui.get("/batch/explode?key_prefix=eu-")).status_code == 404
            assert (await ui.get("/batch/cancel?status=BOGUS")).status_code == 400

        with console(db_url, read_only=True) as viewer:
            assert 'id="batch-actions"' not in (await viewer.get("/?key_prefix=us-")).text
            assert (await viewer.get("/batch/terminate?key_prefix=us-")).status_code == 403
            refused = await viewer.post(
                "/batch/terminate?key_prefix=us-",
                data={"csrf": await viewer.csrf("/login")},
                headers={"Origin": BASE},
            )
            assert refused.status_code == 403
        assert (await statuses(m))["us-1"] is S.WAITING


async def test_batch_retry_and_terminate_from_the_list(db_url: str) -> None:
    m = batch_app.build(db_url)
    async with m:
        await seed(m)
        with console(db_url) as ui:
            for action, query in (("retry", "status=SUSPENDED"), ("terminate", "key_prefix=us-")):
                path = f"/batch/{action}?{query}"
                token = await ui.csrf(path)
                done = await ui.post(path, data={"csrf": token}, headers={"Origin": BASE})
                assert done.status_code == 200  # followed to the list
                assert f"batch {action}: 1 selected, 1 done" in text_of(done.text)
        assert (await statuses(m))["us-1"] is S.TERMINATED
        assert [e.target for e in await m.audit_log(action="retry")] == ["broken-1"]


async def test_a_batch_too_large_for_the_console_points_to_the_command_line(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sagaway.console.views import batches

    monkeypatch.setattr(batches, "LIMIT", 2)
    m = batch_app.build(db_url)
    async with m:
        await seed(m)
        with console(db_url) as ui:
            page = text_of((await ui.get("/batch/cancel?name=order")).text)
            assert "More than 2 workflows" in page and "sagaway batch cancel" in page
            token = await ui.csrf("/batch/cancel?key_prefix=eu-")
            refused = await ui.post(
                "/batch/cancel?name=order", data={"csrf": token}, headers={"Origin": BASE}
            )
            assert refused.status_code == 400
        assert set((await statuses(m)).values()) >= {S.WAITING}
        assert await m.audit_log(action="cancel") == []
