"""docs/security.md's audit trail example runs as written and prints what the page says; the
page's SQL to prune the trail runs on SQLite."""

from __future__ import annotations

import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _section() -> str:
    page = (ROOT / "docs" / "security.md").read_text()
    return page[page.index("## Audit trail") :]


def test_the_audit_example_prints_the_trail(tmp_path: Path) -> None:
    section = _section()
    code = re.findall(r"```python\n(.*?)```", section, re.S)[0]
    expected = re.findall(r"It prints:\n\n```\n(.*?)```", section, re.S)[0]
    script = tmp_path / "audit_demo.py"
    script.write_text(code)
    env = {k: v for k, v in os.environ.items() if k != "SAGAWAY_DATABASE_URL"}
    env["PYTHONPATH"] = os.pathsep.join(sys.path)
    out = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60, check=True,
    ).stdout  # fmt: skip
    assert out.splitlines() == expected.splitlines()
    # The page's pruning statement for SQLite keeps recent entries and deletes old ones.
    [prune] = [line for line in _section().splitlines() if line.endswith("-- SQLite")]
    db = sqlite3.connect(tmp_path / "audit-demo.db")
    try:
        db.execute("UPDATE audit_log SET at = at - 500 * 86400 WHERE action = 'purge'")
        db.execute(prune.removesuffix("-- SQLite").strip().removesuffix(";"))
        kept = [action for (action,) in db.execute("SELECT action FROM audit_log ORDER BY seq")]
    finally:
        db.close()
    assert kept == ["signal", "terminate"]
