"""Schema migrations on every backend (``db_url``: SQLite and PostgreSQL): applied once, also
when several processes open a new database at the same time, and a database migrated by a newer
version of Sagaway is refused.
"""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

from sagaway import errors
from sagaway.states import StepKind, StepStatus, WorkflowStatus
from sagaway.store import open_store
from sagaway.store.migrations import latest_version, migrations
from sagaway.store.records import (
    AuditNote,
    AuditQuery,
    ForkRequest,
    OutputWrite,
    Publication,
    QueueAdmission,
    QueuePlace,
    StepRecord,
)
from tests.store_helpers import T0, is_sqlite, new, raw_sql, run_of, running, step


async def test_migrations_apply_once_and_data_survives_reopen(db_url: str) -> None:
    latest = latest_version("postgres" if not is_sqlite(db_url) else "sqlite")
    assert latest >= 1
    first = open_store(db_url)
    await first.open()
    created = await first.create_workflow(new("k1"), now=T0, lease=None, replace_live=False)
    second = open_store(db_url)  # a second process on the same database
    await second.open()
    assert await second.get_workflow("k1") == created.record
    await second.close()
    await first.close()

    reopened = open_store(db_url)
    await reopened.open()
    try:
        assert await reopened.get_workflow("k1") == created.record
    finally:
        await reopened.close()
    versions = raw_sql(db_url, "SELECT version FROM schema_migrations ORDER BY version")
    assert [v for (v,) in versions] == _shipped(db_url)


def _shipped(db_url: str) -> list[int]:
    """The versions of the migrations this Sagaway ships (numbers may be skipped: a number is
    reserved when a branch takes it, and branches merge in any order)."""
    return [m.version for m in migrations("sqlite" if is_sqlite(db_url) else "postgres")]


def _undo_history_indexes(db_url: str) -> None:
    """Take the history indexes (sqlite v13, postgres v15) back out, and the index of child
    waiters after them (sqlite v14, postgres v17), the cancel log (sqlite v16, postgres v20),
    and the index of child starts (sqlite v17, postgres v21)."""
    _undo_cancel_log(db_url)
    raw_sql(db_url, "DROP INDEX workflows_waiting_for")
    raw_sql(db_url, "DROP INDEX workflows_ended_by_status")
    raw_sql(db_url, "DROP INDEX workflows_by_name")


def _undo_cancel_log(db_url: str) -> None:
    """Take the cancel log (sqlite v16, postgres v20) and what came after it back out."""
    _undo_audit_log(db_url)
    raw_sql(db_url, "DROP INDEX IF EXISTS steps_child_key")
    raw_sql(db_url, "DROP TABLE cancel_requests")


def _undo_audit_log(db_url: str) -> None:
    """Take the audit trail (sqlite v18, postgres v22) and what came after it back out."""
    _undo_outputs(db_url)
    raw_sql(db_url, "DROP TABLE IF EXISTS audit_log")


def _undo_outputs(db_url: str) -> None:
    """Take events, streams and search attributes (sqlite v19, postgres v24) and what came
    after them back out."""
    _undo_pauses(db_url)
    raw_sql(db_url, "DROP TABLE IF EXISTS outputs")
    raw_sql(db_url, "DROP TABLE IF EXISTS search_attributes")
    if not is_sqlite(db_url):
        raw_sql(db_url, "DROP FUNCTION IF EXISTS sagaway_notify_published()")


def _undo_pauses(db_url: str) -> None:
    """Take the pauses (sqlite v20, postgres v25) and what came after them back out."""
    _undo_output_steps(db_url)
    raw_sql(db_url, "DROP TABLE IF EXISTS paused_calls")
    raw_sql(db_url, "ALTER TABLE workflows DROP COLUMN paused_at")


def _undo_queue_waiters(db_url: str) -> None:
    """Take the lines of cluster queues (sqlite v24, postgres v29) back out."""
    raw_sql(db_url, "DROP TABLE IF EXISTS queue_waiters")


def _undo_flow_control(db_url: str) -> None:
    """Take per-key order and debounced starts (sqlite v23, postgres v28) and what came after
    them back out."""
    _undo_queue_waiters(db_url)
    raw_sql(db_url, "DROP TABLE IF EXISTS debounced_starts")
    raw_sql(db_url, "DROP INDEX IF EXISTS workflows_ordering_line")
    raw_sql(db_url, "DROP INDEX IF EXISTS workflows_open_burst")
    for column in ("ordering_key", "ordering_seq", "debounce_key", "debounce_until"):
        raw_sql(db_url, f"ALTER TABLE workflows DROP COLUMN {column}")


def _undo_priority(db_url: str) -> None:
    """Take priority and fairness (sqlite v22, postgres v27) and what came after them back
    out."""
    _undo_flow_control(db_url)
    raw_sql(db_url, "DROP INDEX IF EXISTS workflows_pending_order")
    raw_sql(db_url, "DROP INDEX IF EXISTS workflows_pending_fairness")
    for column in ("priority", "fairness_key", "fairness_weight", "fair_pass"):
        raw_sql(db_url, f"ALTER TABLE workflows DROP COLUMN {column}")


@pytest.mark.direct_db  # it rewinds the schema behind the store's back
async def test_a_database_at_the_previous_schema_gets_priority_and_fairness(db_url: str) -> None:
    """A start left PENDING by the previous version is claimed first among the starts of the
    default level (it has no pass) and reads back with the defaults."""
    dialect = "sqlite" if is_sqlite(db_url) else "postgres"
    [version] = [m.version for m in migrations(dialect) if m.name == "priority_fairness"]
    s = open_store(db_url)
    await s.open()
    old = await s.create_workflow(new("before"), now=T0, lease=None, replace_live=False)
    await s.close()
    _undo_priority(db_url)
    raw_sql(db_url, f"DELETE FROM schema_migrations WHERE version >= {version}")

    upgraded = open_store(db_url)
    await upgraded.open()
    try:
        later = dataclasses.replace(new("after"), fairness_key="t")
        await upgraded.create_workflow(later, now=T0, lease=None, replace_live=False)
        got = await upgraded.claim_due(owner="w", now=T0 + 1, lease_timeout=30, limit=1, exclude=())
        [(record, _)] = got
        assert record.run_id == old.record.run_id
        assert (record.priority, record.fairness_key, record.fair_pass) == (3, "", None)
    finally:
        await upgraded.close()
    versions = raw_sql(db_url, "SELECT version FROM schema_migrations ORDER BY version")
    assert [v for (v,) in versions] == _shipped(db_url)


@pytest.mark.direct_db  # it rewinds the schema behind the store's back
async def test_a_database_at_the_previous_schema_gets_queue_lines(db_url: str) -> None:
    """A slot taken before the upgrade still counts; a refused call is kept in line after."""
    dialect = "sqlite" if is_sqlite(db_url) else "postgres"
    [version] = [m.version for m in migrations(dialect) if m.name == "queue_waiters"]
    s = open_store(db_url)
    await s.open()
    await running(s, "waits")
    taken = QueueAdmission(queue="q", holder="old", concurrency=1, rate_per_second=None)
    assert await s.acquire_queue_slot(taken, expires_at=T0 + 60, now=T0) is None
    await s.close()
    _undo_queue_waiters(db_url)
    raw_sql(db_url, f"DELETE FROM schema_migrations WHERE version >= {version}")

    upgraded = open_store(db_url)
    await upgraded.open()
    try:
        run_id = (await run_of(upgraded, "waits")).run_id
        asking = dataclasses.replace(taken, holder="new", run_id=run_id, call_id="c", priority=4)
        assert await upgraded.acquire_queue_slot(asking, expires_at=T0 + 60, now=T0) == T0
        place = await upgraded.queue_place(run_id, now=T0)
        assert place == QueuePlace(queue="q", priority=4, ahead=0)
    finally:
        await upgraded.close()
    versions = raw_sql(db_url, "SELECT version FROM schema_migrations ORDER BY version")
    assert [v for (v,) in versions] == _shipped(db_url)


@pytest.mark.direct_db  # it rewinds the schema behind the store's back
async def test_a_database_at_the_previous_schema_gets_order_and_debounce(db_url: str) -> None:
    dialect = "sqlite" if is_sqlite(db_url) else "postgres"
    [version] = [m.version for m in migrations(dialect) if m.name == "debounce_and_order"]
    s = open_store(db_url)
    await s.open()
    old = await s.create_workflow(new("before"), now=T0, lease=None, replace_live=False)
    await s.close()
    _undo_flow_control(db_url)
    raw_sql(db_url, f"DELETE FROM schema_migrations WHERE version >= {version}")

    upgraded = open_store(db_url)
    await upgraded.open()
    try:
        record = await upgraded.get_workflow("before")
        assert record is not None and record.run_id == old.record.run_id
        assert record.ordering_key is None and record.debounce_key is None
        ordered = dataclasses.replace(new("after"), ordering_key="k")
        created = await upgraded.create_workflow(ordered, now=T0, lease=None, replace_live=False)
        assert created.record.ordering_seq == 1
    finally:
        await upgraded.close()
    versions = raw_sql(db_url, "SELECT version FROM schema_migrations ORDER BY version")
    assert [v for (v,) in versions] == _shipped(db_url)


@pytest.mark.direct_db  # it rewinds the schema behind the store's back
async def test_a_database_at_the_previous_schema_gets_the_pauses(db_url: str) -> None:
    dialect = "sqlite" if is_sqlite(db_url) else "postgres"
    [version] = [m.version for m in migrations(dialect) if m.name == "pauses"]
    s = open_store(db_url)
    await s.open()
    old = await s.create_workflow(new("before"), now=T0, lease=None, replace_live=False)
    await s.close()
    _undo_pauses(db_url)
    raw_sql(db_url, f"DELETE FROM schema_migrations WHERE version >= {version}")

    upgraded = open_store(db_url)
    await upgraded.open()
    try:
        assert await upgraded.paused_runs([old.record.run_id]) == set()
        assert await upgraded.pause_workflow(old.record.run_id, paused=True, now=T0)
        assert await upgraded.paused_runs([old.record.run_id]) == {old.record.run_id}
        assert await upgraded.list_paused_calls() == []
    finally:
        await upgraded.close()
    versions = raw_sql(db_url, "SELECT version FROM schema_migrations ORDER BY version")
    assert [v for (v,) in versions] == _shipped(db_url)


@pytest.mark.direct_db  # it rewinds the schema behind the store's back
async def test_a_database_at_the_previous_schema_gets_outputs_and_attributes(
    db_url: str,
) -> None:
    dialect = "sqlite" if is_sqlite(db_url) else "postgres"
    [version] = [m.version for m in migrations(dialect) if m.name == "outputs_and_attributes"]
    s = open_store(db_url)
    await s.open()
    old = await s.create_workflow(new("before"), now=T0, lease=None, replace_live=False)
    await s.close()
    _undo_outputs(db_url)
    raw_sql(db_url, f"DELETE FROM schema_migrations WHERE version >= {version}")

    upgraded = open_store(db_url)
    await upgraded.open()
    try:
        run_id = old.record.run_id
        assert await upgraded.read_outputs(run_id, after=0, limit=10) == []
        assert await upgraded.list_search_attributes(run_id) == []
        assert await upgraded.paused_runs([run_id]) == set()
    finally:
        await upgraded.close()
    versions = raw_sql(db_url, "SELECT version FROM schema_migrations ORDER BY version")
    assert [v for (v,) in versions] == _shipped(db_url)


@pytest.mark.direct_db  # it rewinds the schema behind the store's back
async def test_a_database_at_the_previous_schema_gets_the_audit_log(db_url: str) -> None:
    dialect = "sqlite" if is_sqlite(db_url) else "postgres"
    [version] = [m.version for m in migrations(dialect) if m.name == "audit_log"]
    s = open_store(db_url)
    await s.open()
    old = await s.create_workflow(new("before"), now=T0, lease=None, replace_live=False)
    await s.close()
    _undo_audit_log(db_url)
    raw_sql(db_url, f"DELETE FROM schema_migrations WHERE version >= {version}")

    upgraded = open_store(db_url)
    await upgraded.open()
    try:
        assert await upgraded.list_audit(AuditQuery()) == []
        stop = AuditNote(entry_id="e-1", action="terminate", actor="local:ops@host")
        assert await upgraded.end_workflow(
            old.record.run_id, status=WorkflowStatus.TERMINATED, error=None, now=T0, audit=stop
        )
        [entry] = await upgraded.list_audit(AuditQuery())
        assert (entry.action, entry.target, entry.run_id) == (
            "terminate",
            "before",
            old.record.run_id,
        )
    finally:
        await upgraded.close()
    versions = raw_sql(db_url, "SELECT version FROM schema_migrations ORDER BY version")
    assert [v for (v,) in versions] == _shipped(db_url)


@pytest.mark.direct_db  # it rewinds the schema behind the store's back
async def test_a_database_at_the_previous_schema_gets_the_cancel_log(db_url: str) -> None:
    dialect = "sqlite" if is_sqlite(db_url) else "postgres"
    [version] = [m.version for m in migrations(dialect) if m.name == "cancel_log"]
    s = open_store(db_url)
    await s.open()
    old = await s.create_workflow(new("before"), now=T0, lease=None, replace_live=False)
    await s.close()
    _undo_cancel_log(db_url)
    raw_sql(db_url, f"DELETE FROM schema_migrations WHERE version >= {version}")

    upgraded = open_store(db_url)
    await upgraded.open()
    try:
        assert await upgraded.list_cancel_requests(old.record.run_id) == []
        assert await upgraded.request_cancel(old.record.run_id, reason="stop", now=T0 + 1)
        [logged] = await upgraded.list_cancel_requests(old.record.run_id)
        assert (logged.reason, logged.requested_at, logged.accepted) == ("stop", T0 + 1, True)
    finally:
        await upgraded.close()
    versions = raw_sql(db_url, "SELECT version FROM schema_migrations ORDER BY version")
    assert [v for (v,) in versions] == _shipped(db_url)


def _undo_output_steps(db_url: str) -> None:
    """Take the steps of published values (sqlite v21, postgres v26) and what came after them
    back out."""
    _undo_priority(db_url)
    raw_sql(db_url, "DROP TABLE IF EXISTS attribute_writes")
    raw_sql(db_url, "ALTER TABLE outputs DROP COLUMN call_id")


@pytest.mark.direct_db  # it rewinds the schema behind the store's back
async def test_a_database_at_the_previous_schema_names_the_steps_of_published_values(
    db_url: str,
) -> None:
    """Values published before the upgrade are given the publish step that started when they
    were written (one clock reading), when exactly one did; the others stay unnamed, and a
    fork copies only the named ones of the steps it keeps."""
    dialect = "sqlite" if is_sqlite(db_url) else "postgres"
    [version] = [m.version for m in migrations(dialect) if m.name == "output_steps"]
    s = open_store(db_url)
    await s.open()
    held = await running(s, "before")
    run_id = (await run_of(s, "before")).run_id
    for call_id, at in (("1", 1.0), ("2", 2.0), ("3", 3.0), ("4", 3.0)):  # 3 and 4: one time
        started = T0 + at
        publish = step(run_id, call_id, started, kind=StepKind.PUBLISH, name="w", result=None)
        write = OutputWrite(kind="stream", name="log", value=f'"{call_id}"')
        await s.publish(Publication(step=publish, outputs=(write,)), token=held.token, now=started)
    await s.finish_workflow(
        run_id, token=held.token, status=WorkflowStatus.FAILED, result=None, error='"x"', now=T0 + 4
    )
    await s.close()
    _undo_output_steps(db_url)
    raw_sql(db_url, f"DELETE FROM schema_migrations WHERE version >= {version}")

    upgraded = open_store(db_url)
    await upgraded.open()
    try:
        found = await upgraded.read_outputs(run_id, after=0, limit=10)
        assert [(o.value, o.call_id) for o in found] == [
            ('"1"', "1"),
            ('"2"', "2"),
            ('"3"', None),
            ('"4"', None),
        ]
        fork = ForkRequest(
            source_run_id=run_id,
            run_id="fork-run",
            key="fork",
            key_space="fork@fork-run",
            call_ids=("2", "3"),
        )
        made = await upgraded.fork_workflow(fork, now=T0 + 5)
        assert made is not None and made.created
        copied = await upgraded.read_stream("fork-run", stream="log", offset=0, limit=10)
        assert [(o.offset, o.value, o.call_id) for o in copied] == [(0, '"2"', "2")]
    finally:
        await upgraded.close()
    versions = raw_sql(db_url, "SELECT version FROM schema_migrations ORDER BY version")
    assert [v for (v,) in versions] == _shipped(db_url)


def _undo_limits(db_url: str) -> None:
    """Take the limits migration (sqlite v12, postgres v14) back out, as an older Sagaway's
    database would be."""
    raw_sql(db_url, "DROP INDEX workflows_concurrency_key")
    raw_sql(db_url, "ALTER TABLE workflows DROP COLUMN concurrency_key")
    raw_sql(db_url, "ALTER TABLE workflows DROP COLUMN concurrency_limit")
    raw_sql(db_url, "DROP TABLE queue_slots")
    raw_sql(db_url, "DROP TABLE queue_limits")


def _undo_schedules(db_url: str) -> None:
    """Take the schedules migration (sqlite v11, postgres v13) back out."""
    raw_sql(db_url, "DROP TABLE schedules")
    if not is_sqlite(db_url):
        raw_sql(db_url, "DROP FUNCTION sagaway_notify_schedules()")


async def test_concurrent_first_opens_migrate_once(db_url: str) -> None:
    stores = [open_store(db_url) for _ in range(5)]
    # return_exceptions: every open finishes before the stores are closed (an open cancelled
    # mid-way would leave work running at teardown).
    opened = await asyncio.gather(*(s.open() for s in stores), return_exceptions=True)
    try:
        failures = [r for r in opened if isinstance(r, BaseException)]
        assert failures == []
        results = await asyncio.gather(
            *(s.create_workflow(new("k1"), now=T0, lease=None, replace_live=False) for s in stores)
        )
        assert sum(r.created for r in results) == 1
    finally:
        await asyncio.gather(*(s.close() for s in stores))
    versions = raw_sql(db_url, "SELECT version FROM schema_migrations")
    assert len(versions) == len({v for (v,) in versions}) >= 1


@pytest.mark.direct_db  # the server checks its schema when it starts, before any client
async def test_schema_version_newer_than_code_is_refused(db_url: str) -> None:
    s = open_store(db_url)
    await s.open()
    await s.close()
    raw_sql(
        db_url,
        "INSERT INTO schema_migrations (version, name, applied_at) VALUES (9999, 'future', 0)",
    )

    newer = open_store(db_url)
    with pytest.raises(errors.SagawayError, match="upgrade") as info:
        await newer.open()
    assert type(info.value) is errors.SagawayError
    assert "9999" in str(info.value)
    with pytest.raises(errors.ManagerStateError):  # not left half-open
        await newer.get_workflow("k1")


@pytest.mark.direct_db  # it rewinds the schema behind the store's back
async def test_a_database_at_the_previous_schema_gets_the_code_version_column(
    db_url: str,
) -> None:
    dialect = "sqlite" if is_sqlite(db_url) else "postgres"
    [version] = [m.version for m in migrations(dialect) if m.name == "code_version"]
    s = open_store(db_url)
    await s.open()
    old = await s.create_workflow(new("before"), now=T0, lease=None, replace_live=False)
    await s.close()
    # Back to the schema before code versions (sqlite v9, postgres v11), as an older Sagaway
    # left it: the column and its migration record gone (and every later migration's).
    _undo_history_indexes(db_url)
    _undo_limits(db_url)
    _undo_schedules(db_url)
    raw_sql(db_url, "ALTER TABLE workflows DROP COLUMN code_version")
    raw_sql(db_url, f"DELETE FROM schema_migrations WHERE version >= {version}")

    upgraded = open_store(db_url)
    await upgraded.open()
    try:
        before = await upgraded.get_workflow("before")
        assert before == old.record and before.code_version is None
        created = await upgraded.create_workflow(
            dataclasses.replace(new("after"), code_version="2026.12.1"),
            now=T0,
            lease=None,
            replace_live=False,
        )
        assert (await upgraded.get_workflow("after")) == created.record
        assert created.record.code_version == "2026.12.1"
    finally:
        await upgraded.close()
    versions = raw_sql(db_url, "SELECT version FROM schema_migrations ORDER BY version")
    assert [v for (v,) in versions] == _shipped(db_url)


@pytest.mark.direct_db  # it rewinds the schema behind the store's back
async def test_a_database_at_the_previous_schema_gets_the_limits(db_url: str) -> None:
    dialect = "sqlite" if is_sqlite(db_url) else "postgres"
    [version] = [m.version for m in migrations(dialect) if m.name == "limits"]
    s = open_store(db_url)
    await s.open()
    old = await s.create_workflow(new("before"), now=T0, lease=None, replace_live=False)
    await s.close()
    _undo_history_indexes(db_url)
    _undo_limits(db_url)
    raw_sql(db_url, f"DELETE FROM schema_migrations WHERE version >= {version}")

    upgraded = open_store(db_url)
    await upgraded.open()
    try:
        before = await upgraded.get_workflow("before")
        assert before == old.record and before.concurrency_key is None
        keyed = dataclasses.replace(new("after"), concurrency_key="customer-1")
        created = await upgraded.create_workflow(keyed, now=T0, lease=None, replace_live=False)
        assert created.record.concurrency_key == "customer-1"
        assert (
            await upgraded.acquire_queue_slot(
                QueueAdmission(queue="q", holder="h", concurrency=1, rate_per_second=None),
                expires_at=T0 + 1,
                now=T0,
            )
            is None
        )
    finally:
        await upgraded.close()


@pytest.mark.direct_db  # it writes rows as an older Sagaway's database trigger did
async def test_attempt_errors_an_older_version_copied_are_listed_once(db_url: str) -> None:
    """Before the superseded-errors migration (sqlite v15, postgres v18) every write of a step
    with an error also copied it into attempt_errors, the attempt the step row holds included.
    Those rows stay; each attempt is still listed once, and a later attempt keeps them right."""
    store = open_store(db_url)
    await store.open()
    try:
        held = await running(store, "k1")
        run_id = (await run_of(store, "k1")).run_id
        for n in (1, 2):
            await store.record_step(_failed_attempt(run_id, n), token=held.token)
        # What the old trigger wrote for the attempt the step row holds:
        raw_sql(
            db_url,
            "INSERT INTO attempt_errors (run_id, call_id, attempt, error, at) "
            f"VALUES ('{run_id}', 'c1', 2, 'boom 2', {T0 + 2})",
        )
        listed = [(e.attempt, e.error) for e in await store.list_attempt_errors(run_id)]
        assert listed == [(1, "boom 1"), (2, "boom 2")]

        await store.record_step(_failed_attempt(run_id, 3), token=held.token)
        listed = [(e.attempt, e.error) for e in await store.list_attempt_errors(run_id)]
        assert listed == [(1, "boom 1"), (2, "boom 2"), (3, "boom 3")]
        assert raw_sql(db_url, "SELECT attempt FROM attempt_errors ORDER BY attempt") == [
            (1,),
            (2,),
        ]
    finally:
        await store.close()


def _failed_attempt(run_id: str, n: int) -> StepRecord:
    return step(
        run_id,
        "c1",
        T0,
        status=StepStatus.RETRYING,
        attempts=n,
        result=None,
        error=f"boom {n}",
        ended_at=T0 + n,
    )
