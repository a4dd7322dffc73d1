"""docs/limits.md's examples run as written and print what the page says."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.acceptance.docs_examples import assert_prints, code_blocks, page, printed

pytestmark = pytest.mark.long  # runs documented examples in subprocesses (CI runs them)


def test_the_limits_example_prints_what_the_page_says(tmp_path: Path) -> None:
    text = page("limits.md")
    assert_prints(tmp_path, code_blocks(text)[0], printed(text), "limits_demo.py")


def section(text: str, title: str) -> str:
    """The part of ``text`` under the heading ``## title``, up to the next one."""
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end >= 0 else len(text)]


@pytest.mark.parametrize("title", ["Priority and fairness", "Debounce", "Per-key order"])
def test_each_flow_control_example_prints_what_the_page_says(tmp_path: Path, title: str) -> None:
    part = section(page("limits.md"), title)
    assert_prints(tmp_path, code_blocks(part)[0], printed(part), "demo.py")


@pytest.mark.parametrize("title", ["Priority of activity calls"])
def test_each_subsection_example_prints_what_the_page_says(tmp_path: Path, title: str) -> None:
    part = section(page("limits.md"), "Priority and fairness")
    sub = part[part.index(f"\n### {title}\n") :]
    assert_prints(tmp_path, code_blocks(sub)[0], printed(sub), "demo.py")
