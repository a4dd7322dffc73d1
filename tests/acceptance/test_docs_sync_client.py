"""docs/sync-client.md's example runs as written and prints what the page says; its Flask and
Django snippets (not run: no such dependency) are at least valid Python."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "sync-client.md"


def _blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", PAGE.read_text(), re.S)


def test_the_sync_client_example_prints_what_the_page_says(tmp_path: Path) -> None:
    example = next(code for code in _blocks("python") if "run_workers" in code)
    script = tmp_path / "sync_demo.py"
    script.write_text(example)
    env = {k: v for k, v in os.environ.items() if k != "SAGAWAY_DATABASE_URL"}
    env["PYTHONPATH"] = os.pathsep.join(sys.path)
    out = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60, check=True,
    ).stdout  # fmt: skip
    page = PAGE.read_text()
    printed = page.split("It prints:\n\n```\n", 1)[1].split("```", 1)[0]
    assert out.splitlines() == printed.splitlines()
    assert out.splitlines()[0] == "Quote(sku='tea', total=21)"


def test_the_snippets_are_valid_python() -> None:
    blocks = _blocks("python")
    assert len(blocks) == 4
    for code in blocks:
        ast.parse(code)
