"""Acceptance: a purge of 100,000 ended workflows while three worker processes run sagas on
PostgreSQL. Nothing live is touched (nor recent ends, nor ended children of live parents), the
workers' throughput during the purge is at least half of what it was before, and purged keys
can be used again.

The ended rows are bulk-inserted with SQL that fills the real schema's columns (each with two
steps, one in ten with a signal); throughput is completed sagas per second, counted in the
database over a fixed window before the purge and over the purge itself.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import sagaway as sw
from tests.integration import purge_load_app
from tests.store_helpers import raw_sql

pytestmark = [pytest.mark.slow, pytest.mark.long, pytest.mark.timeout(300)]

ENDED = 100_000
WORKERS = 3
WINDOW = 5.0
"""Seconds of the throughput measurement before the purge."""
DAY = 86400

_NOW = "extract(epoch FROM clock_timestamp())"
BULK = [
    # 100,000 ended executions, 40 days old (one in ten a terminated predecessor, is_current
    # false), each with two steps, one in ten with a signal.
    f"""
    INSERT INTO workflows (run_id, key, is_current, name, args, args_hash, status, result, error,
        parent_key, created_at, updated_at, ended_at, suspend_count, queue, key_space)
    SELECT 'bulk-run-' || g, 'bulk-' || g, g % 10 <> 0, 'saga', '[' || g || ']', 'h' || g,
        (ARRAY['COMPLETED', 'FAILED', 'CANCELLED', 'TERMINATED'])[1 + g % 4],
        CASE WHEN g % 4 = 0 THEN '1' END, CASE WHEN g % 4 <> 0 THEN '{{"message": "x"}}' END,
        NULL, t - 5, t, t, 0, 'default', 'bulk-' || g
    FROM (SELECT g, {_NOW} - 40 * {DAY} - g * 0.01 AS t
          FROM generate_series(1, {ENDED}) g) s
    """,
    f"""
    INSERT INTO steps (run_id, call_id, kind, name, status, attempts, result, started_at, ended_at)
    SELECT 'bulk-run-' || g, c::text, 'activity', 'reserve', 'COMPLETED', 1, '"r"',
        {_NOW} - 41 * {DAY}, {_NOW} - 41 * {DAY}
    FROM generate_series(1, {ENDED}) g, generate_series(1, 2) c
    """,
    f"""
    INSERT INTO signals (run_id, name, payload, created_at, consumed_call, consumed_at)
    SELECT 'bulk-run-' || g, 'go', '1', {_NOW} - 41 * {DAY}, '3', {_NOW} - 41 * {DAY}
    FROM generate_series(10, {ENDED}, 10) g
    """,
    # What must survive: old live executions (WAITING on a timer far ahead, SUSPENDED until
    # far ahead), each with a step and a signal; ends of yesterday; and old ended children of
    # the live parents.
    f"""
    INSERT INTO workflows (run_id, key, name, args, args_hash, status, waiting_for, error,
        created_at, updated_at, next_run_at, queue, key_space)
    SELECT 'live-run-' || g, 'live-' || g, 'idle', '[]', 'h',
        CASE WHEN g % 2 = 0 THEN 'WAITING' ELSE 'SUSPENDED' END,
        CASE WHEN g % 2 = 0 THEN 'timer' END, CASE WHEN g % 2 = 1 THEN '{{"message": "x"}}' END,
        {_NOW} - 50 * {DAY}, {_NOW} - 50 * {DAY}, {_NOW} + 1000 * {DAY}, 'default', 'live-' || g
    FROM generate_series(1, 1000) g
    """,
    f"""
    INSERT INTO steps (run_id, call_id, kind, name, status, attempts, result, started_at, ended_at)
    SELECT 'live-run-' || g, '1', 'activity', 'reserve', 'COMPLETED', 1, '"r"',
        {_NOW} - 50 * {DAY}, {_NOW} - 50 * {DAY}
    FROM generate_series(1, 1000) g
    """,
    f"""
    INSERT INTO signals (run_id, name, payload, created_at)
    SELECT 'live-run-' || g, 'later', '1', {_NOW} - 50 * {DAY} FROM generate_series(1, 1000) g
    """,
    f"""
    INSERT INTO workflows (run_id, key, name, args, args_hash, status, result, created_at,
        updated_at, ended_at, queue, key_space, parent_key)
    SELECT 'keep-run-' || g, 'keep-' || g, 'saga', '[]', 'h', 'COMPLETED', '1',
        {_NOW} - d, {_NOW} - d, {_NOW} - d, 'default', 'keep-' || g,
        CASE WHEN g <= 100 THEN 'live-' || (2 * g) END
    FROM (SELECT g, CASE WHEN g <= 100 THEN 45 * {DAY} ELSE {DAY} END AS d
          FROM generate_series(1, 1000) g) s
    """,
]
PROTECTED = """
SELECT w.run_id, w.status, w.updated_at, w.ended_at, w.next_run_at, w.lease_token,
    (SELECT count(*) FROM steps s WHERE s.run_id = w.run_id),
    (SELECT count(*) FROM signals s WHERE s.run_id = w.run_id)
FROM workflows w WHERE w.key LIKE 'live-%' OR w.key LIKE 'keep-%' ORDER BY w.run_id
"""


def completed_between(url: str, start: float, end: float) -> int:
    rows = raw_sql(
        url,
        "SELECT count(*) FROM workflows WHERE status = 'COMPLETED' AND key LIKE 'load-%' "
        f"AND ended_at >= {start!r} AND ended_at < {end!r}",
    )
    return int(rows[0][0])


def server_now(url: str) -> float:
    return float(raw_sql(url, f"SELECT {_NOW}")[0][0])


def start_workers(url: str) -> list[subprocess.Popen[str]]:
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), *sys.path])}
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "tests.integration.purge_load_app", url, str(i)],
            cwd=root,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for i in range(WORKERS)
    ]
    for proc in procs:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready"
    return procs


def stop_workers(procs: list[subprocess.Popen[str]]) -> None:
    for proc in procs:
        if proc.stdin is not None:
            proc.stdin.close()
    for proc in procs:
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


@pytest.mark.postgres
async def test_purge_of_100k_ended_workflows_under_load(postgres_url: str) -> None:
    url = postgres_url
    client = purge_load_app.build(url)
    async with client.connect():  # creates the schema
        pass
    began = time.monotonic()
    for statement in BULK:
        raw_sql(url, statement)
    raw_sql(url, "ANALYZE")
    loaded = time.monotonic() - began
    protected = raw_sql(url, PROTECTED)
    assert len(protected) == 2000

    procs = start_workers(url)
    try:
        async with client.connect():
            # Before the purge, an ended key is taken: a start under it does not run again.
            with pytest.raises(sw.WorkflowAlreadyExists):
                await client.workflow("saga", 7).execute(
                    idempotency_key="bulk-7", on_conflict=sw.OnConflict.FAIL
                )
            await asyncio.sleep(2.0)  # warm-up: every worker at full speed
            start = server_now(url)
            await asyncio.sleep(WINDOW)
            end = server_now(url)
            before = completed_between(url, start, end) / (end - start)

            assert await client.purge(30 * DAY, dry_run=True) == ENDED
            purge_start = server_now(url)
            purged = await client.purge(30 * DAY)
            purge_end = server_now(url)
            during = completed_between(url, purge_start, purge_end) / (purge_end - purge_start)
            report: dict[str, Any] = {
                "bulk_load_s": round(loaded, 1),
                "purge_s": round(purge_end - purge_start, 2),
                "before_per_s": round(before, 1),
                "during_per_s": round(during, 1),
            }
            print(f"\npurge under load: {report}")
            assert purged == ENDED
            assert before > 20, report  # the workers did run
            assert during >= 0.5 * before, report

            # Purged keys can be used again (run by the worker processes).
            for n in (7, 10, 99_999):
                result = await client.workflow("saga", -n).execute_get(
                    idempotency_key=f"bulk-{n}", timeout=30
                )
                assert result == -n
    finally:
        stop_workers(procs)

    assert raw_sql(url, PROTECTED) == protected  # nothing live, recent or needed was touched
    assert raw_sql(url, "SELECT count(*) FROM workflows WHERE key LIKE 'bulk-%'") == [(3,)]
    assert raw_sql(url, "SELECT count(*) FROM steps WHERE run_id LIKE 'bulk-run-%'") == [(0,)]
    assert raw_sql(url, "SELECT count(*) FROM signals WHERE run_id LIKE 'bulk-run-%'") == [(0,)]
    assert all(proc.returncode == 0 for proc in procs)


# ---------------------------------------------------------------------------- SQLite

SQLITE_ENDED = 50_000
SQLITE_BULK = [
    f"""
    WITH RECURSIVE n(g) AS (SELECT 1 UNION ALL SELECT g + 1 FROM n WHERE g < {SQLITE_ENDED})
    INSERT INTO workflows (run_id, key, is_current, name, args, args_hash, status, result,
        created_at, updated_at, ended_at, queue, key_space)
    SELECT 'bulk-run-' || g, 'bulk-' || g, g % 10 <> 0, 'saga', '[' || g || ']', 'h' || g,
        CASE g % 4 WHEN 0 THEN 'COMPLETED' WHEN 1 THEN 'FAILED' WHEN 2 THEN 'CANCELLED'
            ELSE 'TERMINATED' END,
        '1', :t - 5, :t - g * 0.01, :t - g * 0.01, 'default', 'bulk-' || g
    FROM n
    """,
    f"""
    WITH RECURSIVE n(g) AS (SELECT 1 UNION ALL SELECT g + 1 FROM n WHERE g < {SQLITE_ENDED})
    INSERT INTO steps (run_id, call_id, kind, name, status, attempts, result, started_at, ended_at)
    SELECT 'bulk-run-' || g, c.c, 'activity', 'reserve', 'COMPLETED', 1, '"r"', :t, :t
    FROM n, (SELECT '1' AS c UNION ALL SELECT '2') c
    """,
    """
    INSERT INTO workflows (run_id, key, name, args, args_hash, status, waiting_for, created_at,
        updated_at, next_run_at, queue, key_space)
    VALUES ('live-run-1', 'live-1', 'idle', '[]', 'h', 'WAITING', 'timer', :t, :t, :t + 1e9,
        'default', 'live-1')
    """,
    """
    INSERT INTO signals (run_id, name, payload, created_at) VALUES ('live-run-1', 'go', '1', :t)
    """,
]


async def test_purge_under_load_on_sqlite(tmp_path: Path) -> None:
    """The same on SQLite, at half the size, with the workers in this process (one writer
    thread serves both: each purge batch is one job among the workers' own)."""
    import sqlite3

    url = f"sqlite:///{tmp_path}/load.db"
    manager = purge_load_app.build(url)
    async with manager.connect():
        pass
    lite = sqlite3.connect(tmp_path / "load.db")
    with lite:
        for statement in SQLITE_BULK:
            lite.execute(statement, {"t": time.time() - 40 * DAY})
    protected = lite.execute("SELECT * FROM workflows WHERE key = 'live-1'").fetchall()

    done = 0
    stop = asyncio.Event()

    async def lane(lane_id: int) -> None:
        nonlocal done
        n = 0
        while not stop.is_set():
            n += 1
            key = f"load-{lane_id}-{n}"
            assert await manager.workflow("saga", n).execute_get(idempotency_key=key) == n
            done += 1

    async def rate(seconds: float) -> float:
        first, began = done, time.monotonic()
        await asyncio.sleep(seconds)
        return (done - first) / (time.monotonic() - began)

    async with manager:
        lanes = [asyncio.create_task(lane(i)) for i in range(purge_load_app.IN_FLIGHT)]
        try:
            await asyncio.sleep(1.0)  # warm-up
            before = await rate(WINDOW)
            first, began = done, time.monotonic()
            purged = await manager.purge(30 * DAY)
            elapsed = time.monotonic() - began
            during = (done - first) / elapsed
            report = {"purge_s": round(elapsed, 2), "before_per_s": round(before, 1)}
            report["during_per_s"] = round(during, 1)
            print(f"\nSQLite purge under load: {report}")
            assert purged == SQLITE_ENDED
            assert before > 20, report
            assert during >= 0.5 * before, report
            assert await manager.workflow("saga", -7).execute_get(idempotency_key="bulk-7") == -7
        finally:
            stop.set()
            await asyncio.gather(*lanes)
    assert lite.execute("SELECT * FROM workflows WHERE key = 'live-1'").fetchall() == protected
    assert lite.execute("SELECT count(*) FROM signals WHERE run_id = 'live-run-1'").fetchone() == (
        1,
    )
    assert lite.execute("SELECT count(*) FROM steps WHERE run_id LIKE 'bulk-%'").fetchone() == (0,)
    assert lite.execute("SELECT count(*) FROM workflows WHERE key LIKE 'bulk-%'").fetchone() == (1,)
    lite.close()
