"""docs/sync-client.md's example runs as written and prints what the page says; its Flask and
Django snippets (not run: no such dependency) are at least valid Python."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.acceptance.docs_examples import ROOT, printed, run_example

PAGE = ROOT / "docs" / "sync-client.md"


def _blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", PAGE.read_text(), re.S)


def test_the_sync_client_example_prints_what_the_page_says(tmp_path: Path) -> None:
    example = next(code for code in _blocks("python") if "run_workers" in code)
    out = run_example(tmp_path, example, "sync_demo.py").stdout
    assert out.splitlines() == printed(PAGE.read_text()).splitlines()
    assert out.splitlines()[0] == "Quote(sku='tea', total=21)"


def test_the_snippets_are_valid_python() -> None:
    blocks = _blocks("python")
    assert len(blocks) == 4
    for code in blocks:
        ast.parse(code)
