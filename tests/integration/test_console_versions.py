"""Code versions in the web console, on every backend: the workflow page's "Code version" row
and the list's version filter (``unversioned``: executions without one)."""

from __future__ import annotations

import re
from typing import Any

import pytest

import sagaway as sw

pytest.importorskip("starlette", reason="the [ui] extra is part of the dev install")

from tests.integration.test_console import console, text_of

LISTED = re.compile(r'href="/workflows/([^"]+)"')


async def _seed(db_url: str) -> None:
    """PENDING workflows created by processes of versions v1 and v2, and unversioned."""
    for key, version in (("a-v1", "v1"), ("b-v2", "v2"), ("c-none", None), ("d-v1", "v1")):
        m = sw.Manager(db_url, version=version)

        @m.register_workflow(name="job")
        async def job(x: Any = None) -> Any:
            return x

        async with m.connect():
            await m.workflow("job").execute(idempotency_key=key)


async def test_the_console_shows_and_filters_code_versions(db_url: str) -> None:
    await _seed(db_url)
    with console(db_url) as ui:
        page = text_of((await ui.get("/workflows/b-v2")).text)
        assert re.search(r"Code version\s+v2\b", page), page
        page = text_of((await ui.get("/workflows/c-none")).text)
        assert re.search(r"Code version\s+unversioned\b", page), page
        v1 = (await ui.get("/?version=v1")).text
        assert LISTED.findall(v1) == ["d-v1", "a-v1"]
        assert 'value="v1"' in v1  # the filter stays in its field
        mixed = (await ui.get("/?version=v2,unversioned")).text
        assert LISTED.findall(mixed) == ["c-none", "b-v2"]
        assert len(LISTED.findall((await ui.get("/")).text)) == 4
        bad = await ui.get("/?version=a,,b")
        assert bad.status_code == 400 and "comma-separated" in bad.text
