"""docs/events.md's and docs/search-attributes.md's examples run as written and print what the
pages say."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("page", ["events.md", "search-attributes.md"])
def test_the_example_prints_what_the_page_says(tmp_path: Path, page: str) -> None:
    text = (ROOT / "docs" / page).read_text()
    code = re.findall(r"```python\n(.*?)```", text, re.S)[0]
    printed = re.findall(r"It prints:\n\n```\n(.*?)```", text, re.S)[0]
    script = tmp_path / "example.py"
    script.write_text(code)
    env = {k: v for k, v in os.environ.items() if k != "SAGAWAY_DATABASE_URL"}
    env["PYTHONPATH"] = os.pathsep.join(sys.path)
    done = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == printed.splitlines()
