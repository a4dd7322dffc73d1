"""docs/security.md's audit trail example runs as written and prints what the page says; the
page's SQL to prune the trail runs on SQLite."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from tests.acceptance.docs_examples import assert_prints, code_blocks, page, printed


def _section() -> str:
    text = page("security.md")
    return text[text.index("## Audit trail") :]


def test_the_audit_example_prints_the_trail(tmp_path: Path) -> None:
    section = _section()
    code = code_blocks(section)[0]
    assert_prints(tmp_path, code, printed(section), "audit_demo.py")
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
