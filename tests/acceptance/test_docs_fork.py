"""docs/fork.md's example of what a fork carries over (events, streams, search attributes) runs
as written and prints what the page says."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_publications_example_prints_what_the_page_says(tmp_path: Path) -> None:
    text = (ROOT / "docs" / "fork.md").read_text()
    section = text[text.index("### Events, streams and search attributes") :]
    code = re.findall(r"```python\n(.*?)```", section, re.S)[0]
    printed = re.findall(r"It prints:\n\n```\n(.*?)```", section, re.S)[0]
    script = tmp_path / "report.py"
    script.write_text(code)
    env = {k: v for k, v in os.environ.items() if k != "SAGAWAY_DATABASE_URL"}
    env["PYTHONPATH"] = os.pathsep.join(sys.path)
    done = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == printed.splitlines()
