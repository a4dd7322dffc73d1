"""Verbs that write rows referencing a workflow while a purge deletes it (``purge_ended``).

On PostgreSQL a statement's snapshot is taken before it waits for a row lock: a write that
read the ended run in its snapshot and then waited for the purge's lock on it must find it
gone once the purge commits, and answer as for a run that does not exist, not fail on the
foreign key. Each test holds the purge's transaction open on a connection of its own, starts
the verb, waits until PostgreSQL reports it blocked by that transaction, then commits the
purge. SQLite has one writer: a verb waiting for it runs after the purge has committed, which
is the same order without the race (checked the same way on the four backends)."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from sagaway.states import WorkflowStatus
from sagaway.store import Store
from sagaway.store.records import AuditNote, AuditQuery
from tests.integration.test_store_purge import ended, rows
from tests.store_helpers import T0, is_sqlite, pg_conninfo, raw_sql

S = WorkflowStatus


@contextlib.asynccontextmanager
async def purge_held(db_url: str, *, before: float) -> AsyncIterator[tuple[int, list[str]]]:
    """The purge's own statement run in a transaction left open until the block ends:
    (the backend pid holding it, the run ids it deleted). Committed on exit."""
    import psycopg
    from psycopg import sql

    from sagaway.store.postgres.conn import Q

    conninfo, schema = pg_conninfo(db_url)
    async with await psycopg.AsyncConnection.connect(conninfo) as conn:
        await conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
        params = {"before": before, "statuses": [s.value for s in S if s.ended], "limit": 100}
        cur = await conn.execute(Q["purge_ended"], params)
        purged = [row[0] for row in await cur.fetchall()]
        yield conn.info.backend_pid, purged
        await conn.commit()


async def blocked_by(db_url: str, pid: int) -> None:
    """Return once a backend waits for a lock ``pid`` holds (bounded: 10 s)."""
    for _ in range(1000):
        query = f"SELECT count(*) FROM pg_stat_activity WHERE {pid} = ANY(pg_blocking_pids(pid))"
        if raw_sql(db_url, query)[0][0]:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the verb never waited for the purge's lock")


async def during_purge(
    db_url: str, store: Store, run_id: str, verb: Callable[[], Awaitable[Any]]
) -> Any:
    """``verb``'s answer when the purge that deletes ``run_id`` commits while it waits."""
    if is_sqlite(db_url):
        assert await store.purge_ended(before=T0 + 1, statuses=None, limit=100) == [run_id]
        return await verb()
    async with purge_held(db_url, before=T0 + 1) as (pid, purged):
        assert purged == [run_id]
        pending = asyncio.ensure_future(verb())
        await blocked_by(db_url, pid)
        assert not pending.done()
    return await asyncio.wait_for(pending, 10)


@pytest.mark.parametrize("audited", [False, True])
async def test_a_cancel_request_to_a_run_a_purge_deletes_meanwhile_is_not_accepted(
    store: Store, db_url: str, audited: bool
) -> None:
    old = await ended(store, "k", S.COMPLETED, T0)
    note = (
        AuditNote(entry_id=uuid.uuid4().hex, action="cancel", actor="local:test")
        if audited
        else None
    )

    async def cancel() -> bool:
        return await store.request_cancel(old.run_id, reason="stop", now=T0 + 2, audit=note)

    assert await during_purge(db_url, store, old.run_id, cancel) is False
    assert await store.get_run(old.run_id) is None
    assert await store.list_cancel_requests(old.run_id) == []
    assert rows(db_url, "cancel_requests", old.run_id) == 0
    assert await store.list_audit(AuditQuery(run_id=old.run_id)) == []


async def test_a_signal_to_a_run_a_purge_deletes_meanwhile_finds_no_workflow(
    store: Store, db_url: str
) -> None:
    """A send locks the key's current run before it stores anything (``signal_target``): it
    waits for the purge and then finds no workflow under the key."""
    old = await ended(store, "k", S.COMPLETED, T0)

    async def send() -> tuple[object, bool]:
        return await store.send_signal("k", name="go", payload="2", dedupe_id=None, now=T0 + 2)

    assert await during_purge(db_url, store, old.run_id, send) == (None, False)
    assert await store.get_workflow("k") is None
    assert rows(db_url, "signals", old.run_id) == 0
