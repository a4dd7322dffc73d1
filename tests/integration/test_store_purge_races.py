"""Verbs that write rows referencing a workflow while a purge deletes it (``purge_ended``).

On PostgreSQL a statement's snapshot is taken before it waits for a row lock: a write that
read the ended run in its snapshot and then waited for the purge's lock on it must find it
gone once the purge commits, and answer as for a run that does not exist: not fail on the
foreign key (a cancel request), nor go on with half of what the run held (a fork). Each test
holds the purge's transaction open on a connection of its own, starts the verb, waits until
PostgreSQL reports it blocked by that transaction, then commits the purge. SQLite has one
writer: a verb waiting for it runs after the purge has committed, which is the same order
without the race (checked the same way on the four backends)."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from sagaway.states import StepKind, WorkflowStatus
from sagaway.store import Store
from sagaway.store.records import AuditNote, AuditQuery, ForkRequest
from tests.integration.test_store_purge import ended, rows
from tests.store_helpers import T0, is_sqlite, lease, new, pg_conninfo, raw_sql, step

S = WorkflowStatus


@contextlib.asynccontextmanager
async def connection(db_url: str) -> AsyncIterator[Any]:
    """A connection of its own to the store's schema (a transaction begins with its first
    statement)."""
    import psycopg
    from psycopg import sql

    conninfo, schema = pg_conninfo(db_url)
    async with await psycopg.AsyncConnection.connect(conninfo) as conn:
        await conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
        await conn.commit()
        yield conn


@contextlib.asynccontextmanager
async def purge_held(db_url: str, *, before: float) -> AsyncIterator[tuple[int, list[str]]]:
    """The purge's own statement run in a transaction left open until the block ends:
    (the backend pid holding it, the run ids it deleted). Committed on exit."""
    from sagaway.store.postgres.conn import Q

    async with connection(db_url) as conn:
        params = {"before": before, "statuses": [s.value for s in S if s.ended], "limit": 100}
        cur = await conn.execute(Q["purge_ended"], params)
        purged = [row[0] for row in await cur.fetchall()]
        yield conn.info.backend_pid, purged
        await conn.commit()


async def blocked_by(db_url: str, *pids: int) -> None:
    """Return once a backend waits for a lock one of ``pids`` holds (bounded: 10 s)."""
    holders = ", ".join(str(pid) for pid in pids)
    query = (
        "SELECT count(*) FROM pg_stat_activity "
        f"WHERE pg_blocking_pids(pid) && ARRAY[{holders}]::integer[]"
    )
    for _ in range(1000):
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


async def test_a_fork_of_a_run_a_purge_deletes_meanwhile_is_not_made(
    store: Store, db_url: str
) -> None:
    """A fork creates its run from the source in one statement and copies the kept steps in
    the next: a purge committed between the two left a fork without the steps it was to keep
    (they would run again). The fork locks its source first: it waits for the purge, then
    finds no source. To land the purge's commit between the two statements, another
    transaction holds the fork's key (an insert not yet committed) and the fork's insert
    waits for it."""
    old = await ended(store, "k", S.COMPLETED, T0)

    async def fork() -> object:
        return await store.fork_workflow(
            ForkRequest(
                source_run_id=old.run_id,
                run_id=uuid.uuid4().hex,
                key="k-fork",
                key_space="k-fork",
                call_ids=("1", "2"),
            ),
            now=T0 + 2,
        )

    if is_sqlite(db_url):
        assert await store.purge_ended(before=T0 + 1, statuses=None, limit=100) == [old.run_id]
        assert await fork() is None
    else:
        async with connection(db_url) as holder:
            await holder.execute(
                "INSERT INTO workflows (run_id, key, is_current, name, args, args_hash, status, "
                "created_at, updated_at, key_space) VALUES "
                "('holder', 'k-fork', TRUE, 'x', '[]', 'h', 'PENDING', 0, 0, 'k-fork')"
            )
            async with purge_held(db_url, before=T0 + 1) as (purger, purged):
                assert purged == [old.run_id]
                pending = asyncio.ensure_future(fork())
                await blocked_by(db_url, purger, holder.info.backend_pid)
                assert not pending.done()
            await holder.rollback()
        made = await asyncio.wait_for(pending, 10)
        assert made is None, f"a fork was made after its source was purged: {made}"
    assert await store.get_workflow("k-fork") is None


async def test_a_fork_keeping_a_child_start_a_purge_deletes_meanwhile_is_not_made(
    store: Store, db_url: str
) -> None:
    """The source ``p`` ended long after its child ``c``: a purge takes the child, not the
    source. A fork of ``p`` keeping the child's start (step 1) would read an end that is gone;
    the fork looks for the child in its own transaction (on PostgreSQL with a key-share lock,
    which waits for the purge holding the row and then finds it gone) and makes nothing."""
    child = await ended(store, "c", S.COMPLETED, T0)
    held = lease("w", T0 + 300)
    created = await store.create_workflow(new("p"), now=T0 - 10, lease=held, replace_live=False)
    source = created.record.run_id
    start = step(source, "1", T0 - 9, kind=StepKind.CHILD, name="child", result='"c"')
    await store.record_step(start, token=held.token)
    await store.finish_workflow(
        source, token=held.token, status=S.COMPLETED, result="1", error=None, now=T0 + 200
    )

    async def fork() -> object:
        return await store.fork_workflow(
            ForkRequest(
                source_run_id=source,
                run_id=uuid.uuid4().hex,
                key="p-fork",
                key_space="p-fork",
                call_ids=("1",),
            ),
            now=T0 + 300,
        )

    assert await during_purge(db_url, store, child.run_id, fork) is None
    assert await store.get_workflow("p-fork") is None
    assert await store.get_workflow("p") is not None
