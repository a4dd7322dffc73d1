"""docs/schedules.md's worked example runs as written and prints what the page says."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_schedules_example_runs_its_ticks_and_a_manual_trigger(tmp_path: Path) -> None:
    page = (ROOT / "docs" / "schedules.md").read_text()
    code = re.findall(r"```python\n(.*?)```", page, re.S)[2]
    assert "asyncio.run(main())" in code
    printed = re.findall(r"It prints:\n\n```\n(.*?)```", page, re.S)[0]
    script = tmp_path / "schedules_demo.py"
    script.write_text(code)
    env = {k: v for k, v in os.environ.items() if k != "SAGAWAY_DATABASE_URL"}
    env["PYTHONPATH"] = os.pathsep.join(sys.path)
    done = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == printed.splitlines()
