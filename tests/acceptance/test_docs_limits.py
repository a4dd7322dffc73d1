"""docs/limits.md's example runs as written and prints what the page says."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_limits_example_prints_what_the_page_says(tmp_path: Path) -> None:
    page = (ROOT / "docs" / "limits.md").read_text()
    code = re.findall(r"```python\n(.*?)```", page, re.S)[0]
    printed = re.findall(r"It prints:\n\n```\n(.*?)```", page, re.S)[0]
    script = tmp_path / "limits_demo.py"
    script.write_text(code)
    env = {k: v for k, v in os.environ.items() if k != "SAGAWAY_DATABASE_URL"}
    env["PYTHONPATH"] = os.pathsep.join(sys.path)
    done = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == printed.splitlines()


def test_the_priority_example_prints_what_the_page_says(tmp_path: Path) -> None:
    page = (ROOT / "docs" / "limits.md").read_text()
    section = page.split("## Priority and fairness", 1)[1]
    code = re.findall(r"```python\n(.*?)```", section, re.S)[0]
    printed = re.findall(r"It prints:\n\n```\n(.*?)```", section, re.S)[0]
    script = tmp_path / "priority_demo.py"
    script.write_text(code)
    env = {k: v for k, v in os.environ.items() if k != "SAGAWAY_DATABASE_URL"}
    env["PYTHONPATH"] = os.pathsep.join(sys.path)
    done = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == printed.splitlines()
