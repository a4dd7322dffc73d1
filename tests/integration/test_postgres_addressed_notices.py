"""PostgreSQL notices reach the processes that care: an execution's end and cancel request go to
its lease owner, and to every process only once it waits for someone else's end."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import psycopg
import pytest
from psycopg import sql

import sagaway as sw
from sagaway.states import WorkflowStatus
from sagaway.store import DatabaseNotFound, migrations, notices, open_store
from sagaway.store.postgres import PostgresStore
from sagaway.store.records import Lease, NewWorkflow
from sagaway.testing.internals import engine_of, store_of
from tests.conftest import POSTGRES_URL
from tests.store_helpers import step

pytestmark = pytest.mark.postgres

SLOW_POLL = 3600.0  # polling alone would take an hour: only a notice can be this fast


class _Heard:
    """The notices a store passed on, and a way to wait for one."""

    def __init__(self) -> None:
        self.notes: list[str] = []
        self._changed = asyncio.Event()

    def __call__(self, notice: notices.Notice) -> None:
        self.notes.append(notices.encode(notice))  # as the wire writes it
        self._changed.set()

    async def until(self, payload: str, count: int = 1) -> None:
        async def seen() -> None:
            while self.notes.count(payload) < count:
                self._changed.clear()
                await self._changed.wait()

        await asyncio.wait_for(seen(), 10)

    def about_runs(self) -> list[str]:
        return [n for n in self.notes if n.startswith(("ended:", "cancel:"))]


async def _open(url: str) -> PostgresStore:
    store = open_store(url)
    assert isinstance(store, PostgresStore)
    await store.open()
    return store


async def _start(store: PostgresStore, run_id: str, lease: Lease | None) -> None:
    new = NewWorkflow(run_id=run_id, key=run_id, name="flow", args="[1]", args_hash="h")
    await store.create_workflow(new, now=1.0, lease=lease, replace_live=False)


async def _finish(store: PostgresStore, run_id: str, lease: Lease) -> None:
    # cancel_seen: an owner that ends a run a cancel reached has seen it (else the end is
    # refused with CancelPending: test_cancel_promise); these tests are about the notices.
    await store.finish_workflow(
        run_id,
        token=lease.token,
        status=WorkflowStatus.COMPLETED,
        result="1",
        error=None,
        now=2.0,
        cancel_seen=True,
    )


async def _finish_top_level(store: PostgresStore, run_id: str, with_step: bool = False) -> None:
    final = step(run_id, "c1", 1.5) if with_step else None
    await store.finish_workflow(
        run_id,
        token=f"t-{run_id}",
        status=WorkflowStatus.COMPLETED,
        result="1",
        error=None,
        now=2.0,
        final_step=final,
        has_parent=False,
    )


async def test_a_process_hears_the_ends_and_cancels_of_what_it_owns_only(
    postgres_url: str,
) -> None:
    store, other = await _open(postgres_url), await _open(postgres_url)
    heard = _Heard()
    mine, theirs = Lease("t-mine", "me", 99.0), Lease("t-theirs", "them", 99.0)
    try:
        await store.listen(heard, owner="me", ends=False)
        assert heard.notes == ["listening:"]
        for run_id, lease in (("a", mine), ("b", theirs)):
            await _start(other, run_id, lease)
            assert await other.request_cancel(run_id, reason="stop", now=1.5)
            await _finish(other, run_id, lease)
        # An unowned start: its 'ready:' comes on the same connection after all of the above.
        await _start(other, "marker", None)
        await heard.until("ready:")
    finally:
        await store.close()
        await other.close()
    assert heard.about_runs() == ["cancel:a", "ended:a"]


async def test_a_process_is_not_told_of_the_ends_it_made_itself(postgres_url: str) -> None:
    """Its own end of what it owns wakes no listener; an end made elsewhere of what it owns
    (another process finishing with the token, or a terminate, its own included) still
    reaches it."""
    store, other = await _open(postgres_url), await _open(postgres_url)
    heard = _Heard()
    try:
        await store.listen(heard, owner="me", ends=False)
        own = ("own", "own-step", "own-a", "own-b", "own-c")
        for run_id in (*own, "elsewhere", "terminated"):
            await _start(other, run_id, Lease(f"t-{run_id}", "me", 99.0))
        # Each statement that ends an owned run: a child's end, a top-level end with its last
        # step, and ends grouped into one statement.
        await _finish(store, "own", Lease("t-own", "me", 99.0))
        await _finish_top_level(store, "own-step", with_step=True)
        await asyncio.gather(*(_finish_top_level(store, r) for r in ("own-a", "own-b", "own-c")))
        await _finish(other, "elsewhere", Lease("t-elsewhere", "me", 99.0))
        assert await store.end_workflow(
            "terminated", status=WorkflowStatus.TERMINATED, error="stop", now=3.0
        )
        await _start(other, "marker", None)  # its 'ready:' comes after all of the above
        await heard.until("ready:")
    finally:
        await store.close()
        await other.close()
    assert heard.about_runs() == ["ended:elsewhere", "ended:terminated"]


async def test_every_end_once_asked_for_and_again_after_its_connection_is_killed(
    postgres_url: str,
) -> None:
    store, other = await _open(postgres_url), await _open(postgres_url)
    heard = _Heard()
    theirs = Lease("t-theirs", "them", 99.0)
    try:
        await store.listen(heard, owner="me", ends=False)
        await store.listen(heard, owner="me", ends=True)  # returns once they are heard
        assert heard.notes == ["listening:", "listening:ends"]
        await _start(other, "b", theirs)
        assert await other.request_cancel("b", reason="stop", now=1.5)
        await _finish(other, "b", theirs)
        await heard.until("ended:b")
        assert heard.about_runs() == ["cancel:b", "ended:b"]

        runs = store._runs_listener
        assert runs is not None and runs._conn is not None
        with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
            conn.execute("SELECT pg_terminate_backend(%s)", (runs._conn.pgconn.backend_pid,))
        await heard.until("deaf:ends")
        await heard.until("listening:ends", count=2)
        assert "deaf:" not in heard.notes  # the other connection was not touched
        lease = Lease("t-c", "them", 99.0)
        await _start(other, "c", lease)
        await _finish(other, "c", lease)
        await heard.until("ended:c")
    finally:
        await store.close()
        await other.close()


def _define(manager: sw.Manager, entered: asyncio.Event, gate: asyncio.Event) -> None:
    @manager.register_activity(name="gated_step")
    async def gated_step(x: int) -> int:
        entered.set()
        await gate.wait()
        return x + 1

    @manager.register_workflow(name="gated")
    async def gated(x: int) -> int:
        return await gated_step(x)


async def _until(condition: Callable[[], bool]) -> None:
    async def poll() -> None:
        while not condition():  # noqa: ASYNC110
            await asyncio.sleep(0.01)

    await asyncio.wait_for(poll(), 10)


async def test_a_worker_process_hears_others_ends_once_it_waits_for_one(
    postgres_url: str,
) -> None:
    """A process that runs workflows listens for no one else's ends until it waits for one;
    then the end's notice wakes it (its poll is an hour away)."""
    entered, gate = asyncio.Event(), asyncio.Event()
    runner = sw.Manager(postgres_url, poll_interval=SLOW_POLL)
    waiter = sw.Manager(postgres_url, poll_interval=SLOW_POLL)
    _define(runner, entered, gate)
    _define(waiter, entered, gate)
    waiter.task_queues = frozenset({"elsewhere"})  # it runs nothing of the default queue
    async with runner, waiter:
        assert store_of(waiter)._runs_listener is None  # type: ignore[attr-defined]
        handle = await waiter.workflow("gated", 1).execute()
        await asyncio.wait_for(entered.wait(), 10)
        assert runner.worker is not None and handle.run_id in runner.worker.running_ids
        await _woken_by_the_notice(waiter, handle, gate)


async def _woken_by_the_notice(
    waiter: sw.Manager, handle: sw.WorkflowHandle[Any], gate: asyncio.Event
) -> None:
    """``waiter`` waits for ``handle``'s result; the gate opens once it hears ends, so only the
    end's notice can wake it in time (its poll is an hour away)."""
    result = asyncio.ensure_future(handle.result())
    try:
        await _until(lambda: engine_of(waiter).end_notices is True)
        gate.set()
        assert await asyncio.wait_for(result, 10) == 2
    finally:
        result.cancel()


async def test_a_client_only_process_listens_from_its_first_wait(postgres_url: str) -> None:
    """``connect()`` opens no listening connection (a command that only reads needs none); the
    first wait for an end starts listening, and from then the end's notice wakes it (its poll
    is an hour away)."""
    entered, gate = asyncio.Event(), asyncio.Event()
    runner = sw.Manager(postgres_url, poll_interval=SLOW_POLL)
    client = sw.Manager(postgres_url, poll_interval=SLOW_POLL)
    _define(runner, entered, gate)
    _define(client, entered, gate)
    async with runner, client.connect():
        store = store_of(client)
        handle = await client.workflow("gated", 1).execute()
        await asyncio.wait_for(entered.wait(), 10)
        assert await client.list_workflows()  # reads, lists: still deaf
        assert store._listener is None and store._runs_listener is None  # type: ignore[attr-defined]
        await _woken_by_the_notice(client, handle, gate)


async def test_a_reading_open_of_a_current_schema_runs_no_migration(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``create=False`` on a schema at this Sagaway's version: one connection to check it, the
    pool's one, and no migration transaction (its advisory lock would show in pg_stat)."""
    await (await _open(postgres_url)).close()  # creates or migrates the schema
    opened: list[str] = []
    connect = psycopg.AsyncConnection.connect

    async def counted(*args: Any, **kwargs: Any) -> psycopg.AsyncConnection[Any]:
        opened.append("connection")
        return await connect(*args, **kwargs)

    store = open_store(postgres_url, create=False)
    assert isinstance(store, PostgresStore)
    migrated: list[bool] = []
    migrate = store._migrate

    async def watched(conn: Any, retried: bool) -> None:
        migrated.append(True)
        await migrate(conn, retried)

    monkeypatch.setattr(store, "_migrate", watched)
    monkeypatch.setattr(psycopg.AsyncConnection, "connect", counted)
    try:
        await store.open()
        await store.list_workflows(status=None, limit=1)
    finally:
        await store.close()
    assert migrated == []
    assert len(opened) == 2


async def test_a_reading_open_of_a_newer_schema_is_refused(postgres_url: str) -> None:
    """The version check that lets a current schema skip the migration does not let a newer
    one through: ``create=False`` refuses it as opening for writing does."""
    await (await _open(postgres_url)).close()
    store = open_store(postgres_url, create=False)
    assert isinstance(store, PostgresStore)
    newer = migrations.latest_version("postgres") + 1
    with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
        conn.execute(
            sql.SQL("INSERT INTO {}.schema_migrations VALUES (%s, 'future', 0)").format(
                sql.Identifier(store.schema)
            ),
            (newer,),
        )
    with pytest.raises(sw.SagawayError, match=f"schema version {newer}, newer than this"):
        await store.open()
    await store.close()


async def test_a_reading_open_of_another_applications_schema_is_not_found(
    postgres_url: str,
) -> None:
    """A schema that exists without Sagaway's tables is no Sagaway database: ``create=False``
    says so (one query: its ``schema_migrations`` is missing) and leaves the schema as it was."""
    store = open_store(postgres_url, create=False)
    assert isinstance(store, PostgresStore)
    schema = sql.Identifier(store.schema)
    with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(schema))
        conn.execute(sql.SQL("CREATE TABLE {}.orders (id INTEGER)").format(schema))
    with pytest.raises(DatabaseNotFound, match=f"no schema '{store.schema}' with Sagaway's"):
        await store.open()
    await store.close()
    with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
        tables = conn.execute(
            "SELECT tablename FROM pg_catalog.pg_tables WHERE schemaname = %s", (store.schema,)
        ).fetchall()
    assert tables == [("orders",)]


async def test_a_cancel_reaches_the_owner_by_its_notice(postgres_url: str) -> None:
    entered, gate = asyncio.Event(), asyncio.Event()
    client = sw.Manager(postgres_url, poll_interval=SLOW_POLL)
    # A lease of an hour: its heartbeat, which also reads cancel requests, is far away.
    owner = sw.Manager(postgres_url, poll_interval=SLOW_POLL, lease_timeout=3600)
    _define(client, entered, gate)
    _define(owner, entered, gate)
    async with owner, client.connect():
        handle = await client.workflow("gated", 1).execute()
        await asyncio.wait_for(entered.wait(), 10)
        assert await client.cancel(handle.key, "no longer wanted")
        assert owner.worker is not None
        running = owner.worker._running[handle.run_id]  # type: ignore[attr-defined]
        await _until(lambda: running.cancel_reason == "no longer wanted")
        gate.set()
        assert await handle.status() in (WorkflowStatus.RUNNING, WorkflowStatus.CANCELLED)
