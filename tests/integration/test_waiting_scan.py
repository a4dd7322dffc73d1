"""A worker's look for its next due time reads a few rows, however many executions wait.

Between two scans the Recovery Worker asks the store when something next falls due
(``Store.next_due``). That query once took the minimum over every live execution: with a million
WAITING it read a million rows each second, which on SQLite filled the worker's page cache
(resident memory growing with the number of waits) and on PostgreSQL cost the server a scan per
worker per second. It now reads each status in the order of its index and stops at the first
row that passes (``benchmarks/waiting_memory.py`` measures the memory).
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import time
from typing import Any

import pytest
from benchmarks import preload, waiting_memory

from sagaway.store import _params, open_store
from sagaway.store.postgres import claims as pg_claims
from sagaway.store.sqlite import claims as sqlite_claims

N = 1_000

pytestmark = [pytest.mark.direct_db, pytest.mark.long]

DUE = _params.Due(owner="someone-else", queues=None, versions=None)


MILLION_WAITING_STATS = [
    ("workflows", "workflows_waiting_for", "1000000 500000"),
    ("workflows", "workflows_by_name", "1000000 500000 500000 1"),
    ("workflows", "workflows_created", "1000000 500000"),
    ("workflows", "workflows_live", "1000000 1000000 2"),
    ("workflows", "workflows_current_key", "1000000 1"),
    ("workflows", "sqlite_autoindex_workflows_1", "1000000 1"),
]
"""What ANALYZE wrote for the workflows table with a million WAITING (benchmarks.waiting_memory):
with them SQLite's planner once chose to read the whole table for the claim."""


def _with_million_stats(url: str) -> None:
    conn = sqlite3.connect(url.removeprefix("sqlite:///"))
    try:
        conn.execute("DELETE FROM sqlite_stat1 WHERE tbl = 'workflows'")
        conn.executemany("INSERT INTO sqlite_stat1 VALUES (?, ?, ?)", MILLION_WAITING_STATS)
        conn.commit()
    finally:
        conn.close()


def _sqlite_instructions(url: str, name: str) -> int:
    """SQLite virtual-machine instructions a claim query runs (one call)."""
    conn = sqlite3.connect(url.removeprefix("sqlite:///"))
    try:
        query = sqlite_claims._Q[name]
        params = {"owner": DUE.owner, "now": time.time(), "limit": 100}
        params |= sqlite_claims.due_filter(DUE)
        conn.execute(query, params).fetchone()  # prepared and cached before counting
        steps = 0

        def count() -> int:
            nonlocal steps
            steps += 1
            return 0

        conn.set_progress_handler(count, 1)
        conn.execute(query, params).fetchone()
        return steps
    finally:
        conn.close()


def _rows_read(plan: dict[str, Any]) -> int:
    """Rows the scans of an EXPLAIN ANALYZE plan read: kept and filtered out, over all loops."""
    read = 0
    if "Scan" in plan["Node Type"]:
        read += (plan["Actual Rows"] + plan.get("Rows Removed by Filter", 0)) * plan["Actual Loops"]
    return read + sum(_rows_read(child) for child in plan.get("Plans", []))


def _postgres_rows_read(url: str, name: str) -> int:
    import psycopg

    conn_url, schema = preload._pg_target(url)
    with psycopg.connect(conn_url) as conn:
        conn.execute(f'SET search_path TO "{schema}"')
        params = {"owner": DUE.owner, "now": 0.0, "limit": 100, "exclude": "[]"}
        params |= pg_claims.due_filter(DUE)
        row = conn.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + pg_claims.Q[name], params).fetchone()
        assert row is not None
        plan = row[0] if isinstance(row[0], list) else json.loads(row[0])
        return _rows_read(plan[0]["Plan"])


async def _next_due(url: str) -> float | None:
    store = open_store(url)
    await store.open()
    try:
        return await store.next_due(owner=DUE.owner)
    finally:
        await store.close()


def _earliest_timer(url: str) -> float:
    query = "SELECT MIN(next_run_at) FROM workflows WHERE status = 'WAITING'"
    if url.startswith("sqlite"):
        conn = sqlite3.connect(url.removeprefix("sqlite:///"))
        try:
            return float(conn.execute(query).fetchone()[0])
        finally:
            conn.close()
    import psycopg

    conn_url, schema = preload._pg_target(url)
    with psycopg.connect(conn_url) as pg:
        pg.execute(f'SET search_path TO "{schema}"')
        row = pg.execute(query).fetchone()
        assert row is not None
        return float(row[0])


def test_next_due_reads_a_few_rows_with_thousands_waiting(db_url: str) -> None:
    waiting_memory.fill(db_url, N)  # N // 2 timers, the rest signal waits
    assert asyncio.run(_next_due(db_url)) == _earliest_timer(db_url)
    if db_url.startswith("sqlite"):
        # The old query ran about 40 instructions per live execution (40,000 here).
        assert _sqlite_instructions(db_url, "next_due") < N // 2
    else:
        # The old query read every row of the live index (N here).
        assert _postgres_rows_read(db_url, "next_due") < 20


def test_the_claim_reads_the_live_index_whatever_the_statistics_say(sqlite_url: str) -> None:
    waiting_memory.fill(sqlite_url, N)
    _with_million_stats(sqlite_url)
    # Nothing is due (the first timer is a day away): the claim's first part seeks
    # next_run_at <= now in the live index and finds nothing. Planned from these statistics,
    # it read the whole table instead (about 30 instructions per row).
    assert _sqlite_instructions(sqlite_url, "due_candidates") < N // 2
    assert _sqlite_instructions(sqlite_url, "next_due") < N // 2
