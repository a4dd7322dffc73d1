"""docs/limits.md's example runs as written and prints what the page says."""

from __future__ import annotations

from pathlib import Path

from tests.acceptance.docs_examples import assert_prints, code_blocks, page, printed


def test_the_limits_example_prints_what_the_page_says(tmp_path: Path) -> None:
    text = page("limits.md")
    assert_prints(tmp_path, code_blocks(text)[0], printed(text), "limits_demo.py")
