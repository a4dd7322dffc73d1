"""The PostgreSQL connection budget of one process (issue 36): at most ``pool_size`` pooled
connections plus the two notification connections, and a process that cannot get a connection
waits, says so, and goes on when one is free, rather than failing workflows.
"""

from __future__ import annotations

import asyncio
import logging
import urllib.parse
import uuid
from collections.abc import Iterator

import psycopg
import pytest
from psycopg import sql

import sagaway as sw
from sagaway.store import open_store
from sagaway.store.postgres.store import PostgresStore
from tests.conftest import POSTGRES_URL

pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.timeout(120)]

N = 30


def _build(url: str) -> sw.Manager:
    m = sw.Manager(url, poll_interval=0.2, concurrency=N)

    @m.register_activity(name="step")
    async def step(n: int) -> int:
        return n + 1

    @m.register_workflow(name="flow")
    async def flow(n: int) -> int:
        a = await step(n)
        await m.sleep(0.05)
        return await step(a)

    return m


def _backends(application_name: str) -> int:
    with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s",
            (application_name,),
        ).fetchone()
    return int(row[0]) if row else 0


async def test_more_workflows_than_connections_all_complete(postgres_url: str) -> None:
    app = f"sagaway-budget-{uuid.uuid4().hex[:8]}"
    url = f"{postgres_url}&pool_size=1&application_name={app}"
    manager = _build(url)
    most = 0
    async with manager:
        handles = [
            await manager.workflow("flow", n).execute(idempotency_key=f"f-{n}") for n in range(N)
        ]
        results = asyncio.gather(*(handle.result(timeout=60) for handle in handles))
        while not results.done():
            most = max(most, await asyncio.to_thread(_backends, app))
            await asyncio.sleep(0.05)
        assert await results == [n + 2 for n in range(N)]
    # One pooled connection and the two notification connections, whatever the load.
    assert 1 <= most <= 3, most


@pytest.fixture
def limited_role() -> Iterator[str]:
    """A login role of its own (its CONNECTION LIMIT is the test's to change; not a superuser,
    whom no limit holds back), with the privileges of the test server's user (the owner of the
    test's schema)."""
    role = f"sagaway_budget_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
        owner = str(conn.info.user)
        conn.execute(
            sql.SQL("CREATE ROLE {} LOGIN INHERIT IN ROLE {}").format(
                sql.Identifier(role), sql.Identifier(owner)
            )
        )
    try:
        yield role
    finally:
        with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
            conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s",
                (role,),
            )
            conn.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(role)))
            conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(role)))


def _as_role(url: str, role: str) -> str:
    parts = urllib.parse.urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    return urllib.parse.urlunsplit(parts._replace(netloc=f"{role}@{host}"))


def _refuse_connections(role: str) -> None:
    """The server takes no new connection of ``role`` and drops those it has (its
    connections are exhausted: ``too many connections for role``)."""
    with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
        conn.execute(sql.SQL("ALTER ROLE {} CONNECTION LIMIT 0").format(sql.Identifier(role)))
        conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s",
            (role,),
        )


def _allow_connections(role: str) -> None:
    with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
        conn.execute(sql.SQL("ALTER ROLE {} CONNECTION LIMIT -1").format(sql.Identifier(role)))


async def test_a_process_without_connections_waits_says_so_and_goes_on(
    postgres_url: str, limited_role: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="sagaway.store.postgres.conn")
    # The worker reaches the server as a role whose connections the test exhausts; the client
    # (another role) starts and watches the workflows meanwhile.
    worker_url = _as_role(postgres_url, limited_role) + "&pool_size=2&reconnect_delay=0.2"
    worker = _build(worker_url)
    client = _build(postgres_url)
    async with client.connect(), worker:  # the client's role creates the schema
        await asyncio.to_thread(_refuse_connections, limited_role)
        handles = [
            await client.workflow("flow", n).execute(idempotency_key=f"w-{n}") for n in range(N)
        ]
        results = asyncio.gather(*(handle.result(timeout=90) for handle in handles))
        # The worker's statements wait for a connection, and the wait is logged.
        for _ in range(300):
            if "wait over 1s for a PostgreSQL connection" in caplog.text:
                break
            await asyncio.sleep(0.1)
        assert "wait over 1s for a PostgreSQL connection" in caplog.text
        assert "too many connections for role" in caplog.text
        assert "the pool cannot open a connection" in caplog.text
        assert not results.done()
        await asyncio.to_thread(_allow_connections, limited_role)
        assert await results == [n + 2 for n in range(N)]
        for n in range(N):
            described = await client.get_workflow(f"w-{n}").describe()
            assert described.status == sw.WorkflowStatus.COMPLETED
    assert "got a PostgreSQL connection" in caplog.text


async def test_a_statement_waiting_for_a_busy_pool_is_reported(
    postgres_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="sagaway.store.postgres.conn")
    store = open_store(f"{postgres_url}&pool_size=1")
    await store.open()
    try:
        assert isinstance(store, PostgresStore)
        held = await store.pool.getconn()  # the pool's one connection, busy elsewhere
        read = asyncio.ensure_future(store.server_time())
        for _ in range(300):  # the warning comes after a second of waiting
            if "for a PostgreSQL connection" in caplog.text:
                break
            await asyncio.sleep(0.05)
        assert "all 1 connections of this process's pool (pool_size=1) are in use" in caplog.text
        assert not read.done()  # it waits (up to pool_timeout) rather than failing
        await store.pool.putconn(held)
        assert await read is not None
        assert "got a PostgreSQL connection" in caplog.text
    finally:
        await store.close()
