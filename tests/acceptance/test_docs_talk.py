"""docs/updates.md's and docs/pause.md's examples run as written and print what the pages say."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.acceptance.docs_examples import assert_prints, code_blocks, page, printed


@pytest.mark.parametrize("name", ["updates.md", "pause.md"])
def test_the_example_prints_what_the_page_says(name: str, tmp_path: Path) -> None:
    text = page(name)
    assert_prints(tmp_path, code_blocks(text)[0], printed(text), "demo.py")
