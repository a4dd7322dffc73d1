"""The benchmark's preload: N ended workflows with 4 steps each, readable by Sagaway itself."""

from __future__ import annotations

import asyncio
import json
import sqlite3

import pytest
from benchmarks import preload
from click.testing import CliRunner

import sagaway as sw
from sagaway.cli.main import cli
from sagaway.states import WorkflowStatus
from sagaway.store import open_store
from sagaway.store.records import ListQuery

N = 60

pytestmark = pytest.mark.direct_db


def _table_counts(url: str) -> dict[str, int]:
    queries = {
        "workflows": "SELECT count(*) FROM workflows",
        "steps": "SELECT count(*) FROM steps",
        "attempt_errors": "SELECT count(*) FROM attempt_errors",
    }
    if url.startswith("sqlite"):
        conn = sqlite3.connect(url.removeprefix("sqlite:///"))
        try:
            return {k: conn.execute(q).fetchone()[0] for k, q in queries.items()}
        finally:
            conn.close()
    import psycopg
    from psycopg import sql

    conn_url, schema = preload._pg_target(url)
    with psycopg.connect(conn_url) as pg:
        pg.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
        counts = {}
        for k, q in queries.items():
            row = pg.execute(q).fetchone()
            assert row is not None
            counts[k] = row[0]
        return counts


async def _by_status(url: str) -> dict[str, int]:
    manager = sw.Manager(url)
    async with manager.connect():
        return {s.value: c for s, c in (await manager.count_workflows()).items() if c}


def test_preload_inserts_ended_workflows_with_four_steps(db_url: str) -> None:
    record = preload.preload(db_url, N)

    expected = preload.expected_counts(N)
    assert expected == {"COMPLETED": 51, "FAILED": 6, "CANCELLED": 3}
    assert record["statuses"] == expected
    assert asyncio.run(_by_status(db_url)) == expected
    # 4 steps each, written once: a failed step's error is in its row, and attempt_errors
    # (errors of the attempts a step row no longer holds) stays empty
    assert _table_counts(db_url) == {"workflows": N, "steps": 4 * N, "attempt_errors": 0}
    assert asyncio.run(_failed_attempts(db_url)) == [("3", 3, preload.STEP_ERROR)]


async def _failed_attempts(url: str) -> list[tuple[str, int, str]]:
    """The attempt errors of one preloaded FAILED workflow, as the store lists them."""
    store = open_store(url)
    await store.open()
    try:
        query = ListQuery(limit=1, statuses=frozenset({WorkflowStatus.FAILED}))
        [failed] = await store.list_page(query)
        return [
            (e.call_id, e.attempt, e.error) for e in await store.list_attempt_errors(failed.run_id)
        ]
    finally:
        await store.close()


def test_preloaded_rows_read_back_through_the_cli(db_url: str) -> None:
    record = preload.preload(db_url, N)
    sample = record["sample"]
    runner = CliRunner()

    shown = runner.invoke(cli, ["show", "--db", db_url, "--json", sample["key"]])
    assert shown.exit_code == 0, shown.output
    described = json.loads(shown.output)
    assert described["key"] == sample["key"]
    assert described["status"] == preload.status_of(N // 2)
    assert len(described["steps"]) == 4

    listed = runner.invoke(cli, ["list", "--db", db_url, "--status", "FAILED", "--json"])
    assert listed.exit_code == 0, listed.output
    rows = json.loads(listed.output)
    assert len(rows) == preload.expected_counts(N)["FAILED"]
    assert {r["status"] for r in rows} == {"FAILED"}

    named = runner.invoke(cli, ["list", "--db", db_url, "--name", sample["name"], "--json"])
    assert named.exit_code == 0, named.output
    assert len(json.loads(named.output)) == sum(
        1 for i in range(N) if preload.NAMES[preload.name_index(i)] == sample["name"]
    )
