"""docs/patching.md's worked example runs as written and prints what the page says."""

from __future__ import annotations

from pathlib import Path

from tests.acceptance.docs_examples import assert_prints, code_blocks, page, printed


def test_the_patching_example_keeps_the_old_order_on_the_old_path(tmp_path: Path) -> None:
    text = page("patching.md")
    assert_prints(tmp_path, code_blocks(text)[0], printed(text), "patching_demo.py")
