"""docs/cancellation.md's example runs as written and prints what the page says."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_cancellation_example_compensates_and_ends_cancelled(tmp_path: Path) -> None:
    page = (ROOT / "docs" / "cancellation.md").read_text()
    code = re.findall(r"```python\n(.*?)```", page, re.S)[0]
    script = tmp_path / "cancel_demo.py"
    script.write_text(code)
    env = {k: v for k, v in os.environ.items() if k != "SAGAWAY_DATABASE_URL"}
    env["PYTHONPATH"] = os.pathsep.join(sys.path)
    out = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60, check=True,
    ).stdout  # fmt: skip
    assert out.splitlines() == [
        "released res-o-17",
        "workflow 'o-17' ended CANCELLED: customer withdrew",
    ]
