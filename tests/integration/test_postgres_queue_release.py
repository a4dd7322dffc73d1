"""On PostgreSQL a slot's release waits for the admissions of its queue under way: an
admission whose caller was interrupted while its commit was on its way (``ClusterLimit.admit``
gives the slot back at once) must not land after the release and keep its slot until the
expiry. SQLite needs no such care: its one writer runs the two one after the other."""

from __future__ import annotations

import asyncio

import psycopg
import pytest
from psycopg import sql

from sagaway.store import open_store
from sagaway.store.postgres import parse_postgres_url

pytestmark = pytest.mark.postgres

T0 = 1_000_000.0


async def test_a_release_waits_for_an_admission_of_its_queue_under_way(postgres_url: str) -> None:
    store = open_store(postgres_url)
    await store.open()  # migrates the schema
    conninfo, schema, _, _ = parse_postgres_url(postgres_url)
    admission = await psycopg.AsyncConnection.connect(conninfo)
    watcher = await psycopg.AsyncConnection.connect(conninfo, autocommit=True)
    try:
        await admission.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
        # The queue's row, as any earlier admission leaves it; then an admission's
        # transaction, as ``pg_acquire`` runs it, not yet committed.
        await admission.execute("INSERT INTO queue_limits (queue) VALUES ('q')")
        await admission.commit()
        await admission.execute("SELECT 1 FROM queue_limits WHERE queue = 'q' FOR UPDATE")
        await admission.execute(
            "INSERT INTO queue_slots (queue, holder, expires_at) VALUES ('q', 'h', %s)",
            (T0 + 600,),
        )
        release = asyncio.create_task(store.release_queue_slot("q", holder="h", now=T0))

        async def release_blocked() -> None:
            while True:  # the release's session waits for a lock the admission holds
                cur = await watcher.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE %s = ANY(pg_blocking_pids(pid))",
                    (admission.info.backend_pid,),
                )
                row = await cur.fetchone()
                if row is not None and row[0] >= 1:
                    return
                await asyncio.sleep(0.01)

        blocked = asyncio.create_task(release_blocked())
        await asyncio.wait({release, blocked}, timeout=10, return_when=asyncio.FIRST_COMPLETED)
        blocked.cancel()
        await admission.commit()  # the admission lands
        await asyncio.wait_for(release, 10)
        # ... and its slot is released, not kept for 600 s.
        cur = await watcher.execute(
            sql.SQL("SELECT count(*) FROM {}.queue_slots").format(sql.Identifier(schema))
        )
        assert await cur.fetchone() == (0,)
    finally:
        await admission.close()
        await watcher.close()
        await store.close()
