"""The web console's workflow page shows a workflow's updates (the acceptance, the answer, a
rejected request among its signals) and that it is paused (four backends)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

import sagaway as sw

pytest.importorskip("starlette", reason="the [ui] extra is part of the dev install")

from tests.integration.test_console import console, quote, text_of


@dataclasses.dataclass
class Change:
    amount: int


def build(db_url: str) -> sw.Manager:
    manager = sw.Manager(db_url, poll_interval=0.05)

    def check(change: Change) -> None:
        if change.amount < 0:
            raise ValueError("a negative amount")

    async def apply(change: Change) -> int:
        return change.amount + 1

    @manager.register_workflow(name="changes")
    async def changes() -> Any:
        return await manager.update("change").handle(apply, validator=check)

    return manager


async def test_workflow_page_shows_updates_and_pause(db_url: str) -> None:
    manager = build(db_url)
    async with manager:
        handle = await manager.workflow("changes").execute(idempotency_key="c-1")
        with pytest.raises(sw.UpdateRejected):
            await handle.update("change", Change(-1), update_id="bad", timeout=10)
        assert (await handle.update("change", Change(4), update_id="good", timeout=10)).result == 5
        other = await manager.workflow("changes").execute(idempotency_key="c-2")
        assert await other.pause(reason="maintenance")
        with console(db_url) as ui:
            page = text_of((await ui.get(f"/workflows/{quote('c-1')}")).text)
            assert "change:good" in page and "update:change" in page
            assert "a negative amount" in page  # the rejected request, with its reason
            paused = (await ui.get(f"/workflows/{quote('c-2')}")).text
            assert 'id="paused"' in paused
