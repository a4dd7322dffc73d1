"""docs/telemetry.md's example runs as written and prints what the page says."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_telemetry_example_prints_the_metrics_and_spans_the_page_shows(
    tmp_path: Path,
) -> None:
    page = (ROOT / "docs" / "telemetry.md").read_text()
    code = re.findall(r"```python\n(.*?)```", page, re.S)[0]
    printed = re.findall(r"It prints[^\n]*\n\n```\n(.*?)```", page, re.S)[0]
    script = tmp_path / "telemetry_demo.py"
    script.write_text(code)
    env = {k: v for k, v in os.environ.items() if k != "SAGAWAY_DATABASE_URL"}
    env["PYTHONPATH"] = os.pathsep.join(sys.path)
    done = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    assert done.stdout.splitlines() == printed.splitlines()
    logged = [line for line in done.stderr.splitlines() if '"reserving stock"' in line]
    assert len(logged) == 2 and all('"workflow_key": "o-' in line for line in logged)
