"""SQLite-only behaviour of the store (the rest is in the contract suite, on both backends)."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest

from sagaway.store import open_store
from sagaway.store.sqlite.connect import parse_sqlite_url


async def test_cancelled_open_does_not_hang_and_the_store_reopens(sqlite_url: str) -> None:
    store = open_store(sqlite_url)
    opening = asyncio.ensure_future(store.open())
    await asyncio.sleep(0)
    opening.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(opening, 10)
    await asyncio.wait_for(store.open(), 10)  # a stop signal from before must not kill it
    assert await store.count_by_status() == {}
    await store.close()


def test_url_forms(tmp_path: Path) -> None:
    assert parse_sqlite_url("sqlite:///app.db") == ("app.db", {})
    assert parse_sqlite_url(f"sqlite:///{tmp_path}/a.db?synchronous=full") == (
        f"{tmp_path}/a.db",
        {"synchronous": "full"},
    )
    with pytest.raises(ValueError, match="without a file path"):
        parse_sqlite_url("sqlite://")
    with pytest.raises(ValueError, match="synchronous must be one of"):
        open_store("sqlite:///x.db?synchronous=sometimes")
    with pytest.raises(ValueError, match="unknown sqlite URL options"):
        open_store("sqlite:///x.db?journal=wal")


async def test_lease_lost_names_the_run(sqlite_url: str) -> None:
    from sagaway import errors
    from sagaway.states import WorkflowStatus

    store = open_store(sqlite_url)
    await store.open()
    try:
        with pytest.raises(errors.LeaseLost) as lost:
            await store.suspend_workflow("r1", token="t", error='"e"', now=1.0, next_run_at=2.0)
        assert (lost.value.run_id, str(lost.value)) == ("r1", "lost ownership of run r1")
        with pytest.raises(errors.LeaseLost) as lost:
            await store.finish_workflow(
                "r2", token="t", status=WorkflowStatus.FAILED, result=None, error=None, now=1.0
            )
        assert lost.value.run_id == "r2"
    finally:
        await store.close()
    # A message of its own replaces the default one.
    text = errors.LeaseLost("r1", "another process took run r1 over")
    assert (str(text), text.run_id) == ("another process took run r1 over", "r1")


def test_rows_are_read_by_column_name() -> None:
    """A SELECT with another column order, or more columns (a claim's lease_token), yields the
    same record: nothing is read by position."""
    import dataclasses
    import sqlite3

    from sagaway.states import WorkflowStatus
    from sagaway.store import _rows
    from sagaway.store.records import WorkflowRecord

    record = WorkflowRecord(
        run_id="r1",
        key="k1",
        name="flow",
        args="{}",
        args_hash="h",
        status=WorkflowStatus.RUNNING,
        result=None,
        error=None,
        parent_key=None,
        created_at=1.0,
        updated_at=2.0,
        ended_at=None,
        lease_owner="w",
        lease_expires_at=3.0,
        next_run_at=1.0,
        suspend_count=0,
        key_space="ks",
    )
    columns = {f.name: getattr(record, f.name) for f in dataclasses.fields(record)}
    columns["status"] = record.status.value
    columns = {"lease_token": "t", **dict(reversed(columns.items()))}
    conn = sqlite3.connect(":memory:")
    conn.row_factory = sqlite3.Row
    select = "SELECT " + ", ".join(f"? AS {name}" for name in columns)
    row = conn.execute(select, list(columns.values())).fetchone()
    conn.close()
    assert _rows.workflow_from_row(row) == record
    assert _rows.workflow_from_row(columns) == record


async def test_a_base_exception_in_a_job_fails_that_call_only(sqlite_url: str) -> None:
    """A receive's accept callback runs on the writer thread: a BaseException from it must fail
    that call, not end the thread (every later call would wait forever)."""
    from sagaway import errors
    from sagaway.store.sqlite import SQLiteStore

    store = open_store(sqlite_url)
    assert isinstance(store, SQLiteStore)
    await store.open()
    try:

        def exits(conn: object) -> None:
            raise SystemExit("a callback called sys.exit()")

        with pytest.raises(errors.SagawayError, match="SystemExit"):
            await asyncio.wait_for(store._call(exits), 10)
        assert await asyncio.wait_for(store.count_by_status(), 10) == {}
    finally:
        await store.close()


async def test_a_failing_job_in_a_batch_loses_only_its_own_writes(sqlite_url: str) -> None:
    """The calls of one turn of the event loop share a transaction. One that raises after it
    wrote has its writes undone; the others' writes commit and their callers get their
    results (the batch runs again, each job in a savepoint)."""
    from sagaway.store.sqlite import SQLiteStore

    store = open_store(sqlite_url)
    assert isinstance(store, SQLiteStore)
    await store.open()
    runs: dict[str, int] = {}
    try:
        await store._call(lambda conn: conn.execute("CREATE TABLE probe (who TEXT)"))

        def writes(who: str, fail: bool) -> Any:
            def op(conn: sqlite3.Connection) -> str:
                runs[who] = runs.get(who, 0) + 1
                conn.execute("INSERT INTO probe VALUES (?)", (who,))
                if fail:
                    raise ValueError(f"{who} failed after its write")
                return who

            return op

        # A call that holds the writer until the five are made: they go over as one batch.
        release = threading.Event()
        holding = asyncio.ensure_future(store._call(lambda conn: release.wait(10)))
        await asyncio.sleep(0)  # the holding call is handed over (alone: the writer was idle)
        jobs = [asyncio.ensure_future(store._call(writes(f"job{i}", i == 2))) for i in range(5)]
        await asyncio.sleep(0)  # the five are made, and handed over at the end of this turn
        release.set()
        assert await asyncio.wait_for(holding, 10) is True
        outcomes = await asyncio.wait_for(asyncio.gather(*jobs, return_exceptions=True), 10)
        assert outcomes[:2] + outcomes[3:] == ["job0", "job1", "job3", "job4"]
        assert isinstance(outcomes[2], ValueError)
        rows = await store._call(lambda conn: conn.execute("SELECT who FROM probe").fetchall())
        assert sorted(r[0] for r in rows) == ["job0", "job1", "job3", "job4"]
        # One batch: run together first (job2 stopped it), then each in its own savepoint.
        assert runs == {"job0": 2, "job1": 2, "job2": 2, "job3": 1, "job4": 1}
    finally:
        await store.close()


async def test_the_checkpointer_thread_copies_the_wal_back_not_the_writer(tmp_path: Path) -> None:
    """The writer's commits leave the WAL to the checkpointer thread (a checkpoint inside a
    commit stalls every write behind it): pages reach the database file although the writer's
    own automatic checkpoint is far above what was written. The thread starts at the first
    write (a process that only reads, like `sagaway list`, has none); closing stops it."""
    from sagaway.store.sqlite import SQLiteStore
    from sagaway.store.sqlite.checkpoint import BACKSTOP_PAGES

    path = tmp_path / "engine.db"
    store = open_store(f"sqlite:///{path}")
    assert isinstance(store, SQLiteStore)
    await store.open()
    try:
        pragma = "PRAGMA wal_autocheckpoint"
        assert await store._call(lambda c: c.execute(pragma).fetchone()[0]) == BACKSTOP_PAGES
        await store._call(lambda c: c.execute("CREATE TABLE probe (data BLOB)"))
        assert await store.count_by_status() == {}
        assert not _checkpointer_threads()  # nothing written yet (a table is no row)
        before = path.stat().st_size
        for _ in range(40):  # ~1,000 pages of 4 KiB, well below the writer's threshold
            await store._call(lambda c: c.execute("INSERT INTO probe VALUES (randomblob(1e5))"))

        async def copied_back() -> None:
            while path.stat().st_size < before + 4_000_000:  # noqa: ASYNC110 (a file, no event)
                await asyncio.sleep(0.02)

        await asyncio.wait_for(copied_back(), 20)
        assert store.checkpointer is not None and store.checkpointer.checkpoints >= 1
        assert len(_checkpointer_threads()) == 1
        assert await store._call(lambda c: c.execute("SELECT count(*) FROM probe").fetchone()[0])
    finally:
        await store.close()
    assert not _checkpointer_threads()


def _checkpointer_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("sagaway-sqlite-checkpoint")]


async def _store_with_a_workflow(url: str) -> tuple[Any, str, str]:
    """An open SQLite store holding one RUNNING workflow: (store, run id, lease token)."""
    from sagaway.store.sqlite import SQLiteStore
    from tests.store_helpers import T0, lease, new

    store = open_store(url)
    assert isinstance(store, SQLiteStore)
    await store.open()
    held = lease()
    created = await store.create_workflow(new("k1"), now=T0, lease=held, replace_live=False)
    return store, created.record.run_id, held.token


def _writes_by_thread(store: Any) -> list[str]:
    """The thread names that begin write transactions on the store's connection, from now on."""
    seen: list[str] = []

    def trace(statement: str) -> None:
        if statement.startswith("BEGIN IMMEDIATE"):
            seen.append(threading.current_thread().name)

    store._conn.set_trace_callback(trace)
    return seen


async def test_a_lone_write_runs_on_the_event_loop_and_concurrent_ones_go_together(
    sqlite_url: str,
) -> None:
    """One saga at a time: its writes need no hand-off to the writer thread (two thread wake-ups
    each). Many at once: they still go to the writer, together, one transaction per batch."""
    from tests.store_helpers import T0, step

    store, run_id, token = await _store_with_a_workflow(sqlite_url)
    try:
        begins = _writes_by_thread(store)
        await store.record_step(step(run_id, "1", T0), token=token)
        assert begins == [threading.current_thread().name]

        begins.clear()
        await asyncio.gather(
            *(store.record_step(step(run_id, str(i), T0), token=token) for i in range(2, 52))
        )
        assert begins and len(begins) <= 3, begins  # batched, not one transaction per call
        assert threading.current_thread().name not in begins
        assert len(await store.load_steps(run_id)) == 51
    finally:
        await store.close()


async def test_a_lone_write_fails_on_the_event_loop_as_it_would_on_the_writer(
    sqlite_url: str,
) -> None:
    """A fenced write refused on the loop's thread raises the same error and writes nothing;
    the connection is left outside any transaction for the next call."""
    from sagaway import errors
    from tests.store_helpers import T0, step

    store, run_id, token = await _store_with_a_workflow(sqlite_url)
    try:
        begins = _writes_by_thread(store)
        with pytest.raises(errors.LeaseLost):
            await store.record_step(step(run_id, "1", T0), token="not-the-token")
        assert begins == [threading.current_thread().name]
        assert not store._conn.in_transaction
        assert await store.load_steps(run_id) == []
        await store.record_step(step(run_id, "1", T0), token=token)
        assert len(await store.load_steps(run_id)) == 1
    finally:
        await store.close()


async def test_lone_writes_set_busy_timeout_once_and_the_writer_still_waits_for_the_lock(
    sqlite_url: str,
) -> None:
    """One saga at a time switches the writer's connection to "do not wait for the lock" once,
    not twice per write (each PRAGMA is parsed anew); a write that then finds the lock held by
    another connection still goes to the writer thread, which waits for it as configured."""
    from tests.store_helpers import T0, step

    store, run_id, token = await _store_with_a_workflow(sqlite_url)
    other = sqlite3.connect(sqlite_url.removeprefix("sqlite:///"), isolation_level=None)
    try:
        statements: list[str] = []
        store._conn.set_trace_callback(statements.append)
        for call_id in ("1", "2", "3"):
            await store.record_step(step(run_id, call_id, T0), token=token)
        pragmas = [s for s in statements if s.startswith("PRAGMA busy_timeout")]
        # At most one switch (none if the setup's own lone write already made it).
        assert pragmas in ([], ["PRAGMA busy_timeout = 0"]), statements
        assert statements.count("BEGIN IMMEDIATE") == 3

        other.execute("BEGIN IMMEDIATE")
        write = asyncio.ensure_future(store.record_step(step(run_id, "4", T0), token=token))
        ticks = 0
        while "PRAGMA busy_timeout = 30000" not in statements:  # the writer's turn
            await asyncio.sleep(0.01)
            ticks += 1
            assert ticks < 1000, statements
        for _ in range(5):
            await asyncio.sleep(0.01)
        assert not write.done()  # waiting for the lock, not failed at once
        other.execute("COMMIT")
        await asyncio.wait_for(write, 10)
        assert len(await store.load_steps(run_id)) == 4
    finally:
        other.close()
        await store.close()


async def test_another_process_holding_the_write_lock_never_blocks_the_event_loop(
    sqlite_url: str,
) -> None:
    """While another connection (another process, as far as SQLite knows) holds the write lock,
    a lone write does not wait for it on the loop's thread: it goes to the writer thread, which
    waits (busy_timeout), and the loop goes on meanwhile. The write lands once the lock is
    free."""
    from tests.store_helpers import T0, step

    store, run_id, token = await _store_with_a_workflow(sqlite_url)
    other = sqlite3.connect(sqlite_url.removeprefix("sqlite:///"), isolation_level=None)
    try:
        begins = _writes_by_thread(store)
        other.execute("BEGIN IMMEDIATE")
        write = asyncio.ensure_future(store.record_step(step(run_id, "1", T0), token=token))
        ticks = 0
        while len(begins) < 2:  # the try on the loop's thread, then the writer's (waiting)
            await asyncio.sleep(0.01)
            ticks += 1
            assert ticks < 1000, begins
        for _ in range(5):  # the loop runs on while the writer waits for the lock
            await asyncio.sleep(0.01)
        assert not write.done()
        assert begins[0] == threading.current_thread().name and begins[1] != begins[0]
        other.execute("COMMIT")
        await asyncio.wait_for(write, 10)
        assert len(await store.load_steps(run_id)) == 1
        assert store._conn.execute("PRAGMA busy_timeout").fetchone()[0] == 30000
    finally:
        other.close()
        await store.close()


async def test_an_end_leaves_nothing_of_its_execution_on_the_event_loop(sqlite_url: str) -> None:
    """When a workflow's result wakes its caller, the execution's bookkeeping is already done:
    its worker holds nothing of it, and no callback of its task waits on the loop's ready queue.
    A sequential client's next start then finds the loop idle, and its insert runs at once on
    the loop's thread instead of being handed to the writer thread (two thread wake-ups)."""
    import sagaway as sw

    manager = sw.Manager(sqlite_url, poll_interval=3600)

    @manager.register_activity
    async def add_one(x: int) -> int:
        return x + 1

    @manager.register_workflow
    async def add_two(x: int) -> int:
        return await add_one(await add_one(x))

    loop = asyncio.get_running_loop()
    async with manager:
        for i in range(5):
            started = manager.workflow(add_two, i)
            assert await started.execute_get(idempotency_key=f"wf-{i}") == i + 2
            assert manager.worker is not None and manager.worker.executions() == []
            leftovers = [h for h in getattr(loop, "_ready", ()) if "Worker" in repr(h)]
            assert leftovers == []
