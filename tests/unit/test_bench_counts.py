"""benchmarks/counts.py's pure parts: the SQL normalisation and the per-workflow difference."""

from __future__ import annotations

import sqlite3
from typing import Any

from benchmarks import counts


def test_expanded_sql_is_normalised_to_its_statement() -> None:
    expanded: list[str] = []
    conn = sqlite3.connect(":memory:")
    conn.set_trace_callback(expanded.append)
    conn.execute("CREATE TABLE t (a, b, c, d)")
    sql = "SELECT a FROM t WHERE a = ? AND b = ? AND c = ? AND d IS NULL AND b IS NOT NULL"
    conn.execute(sql, ("it's", 1.5, None))
    conn.execute(sql, (b"\x01", -2, 3))
    first, second = (counts.normalise(s) for s in expanded[-2:])
    assert first == second
    assert first == (
        "SELECT a FROM t WHERE a = ? AND b = ? AND c = ? AND d IS NULL AND b IS NOT NULL"
    )


def _sql_run(n: int, inserts: int, steps: int) -> dict[str, Any]:
    conn = {"traced": {"INSERT": inserts}, "steps": {"INSERT": steps}}
    return {"mode": "sql", "n": n, "sql": {"engine.db#0@writer": conn}}


def test_per_workflow_counts_leave_fixed_costs_out() -> None:
    # 40 statements of start-up in both runs, then 1 a workflow.
    per = counts._per_workflow(_sql_run(500, 540, 5400), _sql_run(1000, 1040, 10400))
    assert per["traced"] == {"[engine] INSERT": 1.0}
    assert per["steps"] == {"[engine] INSERT": 10.0}
