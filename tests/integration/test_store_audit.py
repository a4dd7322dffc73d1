"""Store contract of the audit trail, on SQLite, PostgreSQL and the Engine Server in front of
each: an audited verb writes its entry with its change, in its transaction, only when it
changes something, once however often it is tried; the entry names the run and key the verb
acted on (read from the row, not from the caller), at the database's clock; purging a
workflow keeps its entries; listing filters and pages. Through the Engine Server the server
decides who acted: the client's name is kept only as the claim ``on_behalf_of``."""

from __future__ import annotations

import time
import uuid

import pytest

from sagaway.states import WorkflowStatus
from sagaway.store import Store, _audit
from sagaway.store.records import (
    AuditNote,
    AuditQuery,
    AuditRecord,
    ForkRequest,
    SchedulePause,
    SchedulePut,
    ScheduleRecord,
)
from tests.grpc_server import direct_url
from tests.store_helpers import (
    T0,
    is_sqlite,
    lease,
    new,
    pg_conninfo,
    raw_sql,
    run_of,
    running,
    step,
)

S = WorkflowStatus


def note(action: str, *, actor: str = "local:ops@host", **kw: str | None) -> AuditNote:
    return AuditNote(entry_id=uuid.uuid4().hex, action=action, actor=actor, **kw)


def through_server(db_url: str) -> bool:
    return db_url.startswith("grpc")


def expect_who(db_url: str, entry: AuditRecord, sent: AuditNote) -> None:
    """Direct: who the note says. Through a server: the server's caller (the tests' servers
    have no token: anonymous@<address>), and the note's actor as the claim."""
    if through_server(db_url):
        assert entry.actor == "anonymous@127.0.0.1"
        assert entry.on_behalf_of == (sent.on_behalf_of or sent.actor)
    else:
        assert (entry.actor, entry.on_behalf_of) == (sent.actor, sent.on_behalf_of)


async def entries(store: Store, **query: object) -> list[AuditRecord]:
    return await store.list_audit(AuditQuery(**query))  # type: ignore[arg-type]


def schedule(schedule_id: str = "nightly") -> ScheduleRecord:
    return ScheduleRecord(
        id=schedule_id,
        workflow="report",
        args="{}",
        queue="default",
        cron="0 3 * * *",
        timezone="UTC",
        catch_up="one",
        paused=False,
        next_tick_at=T0 + 3600,
        created_at=T0,
        updated_at=T0,
    )


async def test_each_verb_writes_its_entry_with_its_change(store: Store, db_url: str) -> None:
    started = time.time()
    create = note("start", reason="backfill", details='{"on_conflict":"FAIL"}')
    created = await store.create_workflow(
        new("order-1"), now=T0, lease=None, replace_live=False, audit=create
    )
    run_id = created.record.run_id
    cancel = note("cancel", reason="customer asked", on_behalf_of="alice")
    assert await store.request_cancel(run_id, reason="customer asked", now=T0 + 1, audit=cancel)
    signal = note("signal", reason="approved by phone")
    _, stored = await store.send_signal(
        "order-1", name="approve", payload="true", dedupe_id=None, now=T0 + 2, audit=signal
    )
    assert stored
    terminate = note("terminate", reason="stuck")
    assert await store.end_workflow(
        run_id, status=S.TERMINATED, error='{"message":"stuck"}', now=T0 + 3, audit=terminate
    )
    found = await entries(store)
    assert [e.action for e in found] == ["terminate", "signal", "cancel", "start"]  # newest first
    assert [e.seq for e in found] == sorted((e.seq for e in found), reverse=True)
    for entry, sent in zip(found, [terminate, signal, cancel, create], strict=True):
        assert (entry.run_id, entry.target) == (run_id, "order-1")
        assert (entry.reason, entry.details) == (sent.reason, sent.details)
        expect_who(db_url, entry, sent)
        # The database's clock (T0 is in 2023), not the `now` the caller passed.
        assert started - 5 <= entry.at <= time.time() + 5


async def test_retry_fork_and_schedules_are_recorded(store: Store, db_url: str) -> None:
    held = await running(store, "job")
    record = await run_of(store, "job")
    await store.suspend_workflow(
        record.run_id, token=held.token, error='{"message":"boom"}', now=T0, next_run_at=T0 + 60
    )
    assert await store.retry_now(record.run_id, now=T0 + 1, audit=note("retry", reason="fixed"))
    # Ended, so it can be forked; the fork's entry is about the new execution.
    claimed = await store.claim_due(
        owner="w", now=T0 + 2, lease_timeout=30, limit=1, exclude=(), queues=None
    )
    [(_, again)] = claimed
    await store.finish_workflow(
        record.run_id, token=again.token, status=S.COMPLETED, result="1", error=None, now=T0 + 3
    )
    fork_run = uuid.uuid4().hex
    forked = await store.fork_workflow(
        ForkRequest(
            source_run_id=record.run_id,
            run_id=fork_run,
            key="job-fix",
            key_space=fork_run,
            call_ids=(),
        ),
        now=T0 + 4,
        audit=note("fork", details='{"from_step":1}'),
    )
    assert forked is not None and forked.created
    await store.put_schedule(
        SchedulePut(schedule=schedule(), keep_paused=False), now=T0, audit=note("schedule.put")
    )
    paused = await store.set_schedule_paused(
        SchedulePause(id="nightly", paused=True, next_tick_at=T0 + 60),
        now=T0,
        audit=note("schedule.pause"),
    )
    assert paused is not None
    assert await store.delete_schedule("nightly", audit=note("schedule.delete", reason="unused"))
    found = {e.action: e for e in await entries(store)}
    assert found["retry"].run_id == record.run_id and found["retry"].reason == "fixed"
    assert (found["fork"].run_id, found["fork"].target) == (fork_run, "job-fix")
    for action in ("schedule.put", "schedule.pause", "schedule.delete"):
        assert (found[action].run_id, found[action].target) == (None, "nightly")
    assert found["schedule.delete"].reason == "unused"


async def test_a_verb_that_changes_nothing_writes_no_entry(store: Store) -> None:
    created = await store.create_workflow(new("a"), now=T0, lease=None, replace_live=False)
    run_id = created.record.run_id
    assert await store.end_workflow(run_id, status=S.TERMINATED, error=None, now=T0 + 1)
    # Every one of these is refused or finds nothing to do: the trail stays empty.
    assert not await store.end_workflow(
        run_id, status=S.TERMINATED, error=None, now=T0 + 2, audit=note("terminate")
    )
    assert not await store.request_cancel(run_id, reason="late", now=T0 + 2, audit=note("cancel"))
    assert not await store.retry_now(run_id, now=T0 + 2, audit=note("retry"))
    _, stored = await store.send_signal(
        "a", name="go", payload="1", dedupe_id=None, now=T0 + 2, audit=note("signal")
    )
    assert not stored
    taken = await store.create_workflow(
        new("a"), now=T0 + 2, lease=None, replace_live=False, audit=note("start")
    )
    assert not taken.created
    assert not await store.delete_schedule("none", audit=note("schedule.delete"))
    assert (
        await store.set_schedule_paused(
            SchedulePause(id="none", paused=True, next_tick_at=T0),
            now=T0,
            audit=note("schedule.pause"),
        )
        is None
    )
    assert await entries(store) == []


async def test_an_entry_is_written_once_however_often_its_call_is_tried(store: Store) -> None:
    created = await store.create_workflow(new("w"), now=T0, lease=None, replace_live=False)
    cancel = note("cancel")
    for _ in range(3):  # a client tried it again: the request is kept, the entry once
        assert await store.request_cancel(
            created.record.run_id, reason="stop", now=T0 + 1, audit=cancel
        )
    assert [e.action for e in await entries(store)] == ["cancel"]


async def test_entries_outlive_the_purge_of_their_workflow(store: Store) -> None:
    held = lease("w", T0 + 30)
    created = await store.create_workflow(new("old"), now=T0, lease=held, replace_live=False)
    run_id = created.record.run_id
    await store.record_step(step(run_id, "1", T0), token=held.token)
    assert await store.end_workflow(
        run_id, status=S.TERMINATED, error=None, now=T0 + 1, audit=note("terminate", reason="x")
    )
    assert await store.purge_ended(before=T0 + 10, statuses=None, limit=10) == [run_id]
    assert await store.get_run(run_id) is None
    purge = note("purge", reason="retention", details='{"deleted":1}')
    await store.record_audit(purge)
    [kept] = await entries(store, run_id=run_id)
    assert (kept.action, kept.target, kept.reason) == ("terminate", "old", "x")
    [purged] = await entries(store, actions=frozenset({"purge"}))
    assert (purged.run_id, purged.target, purged.details) == (None, None, '{"deleted":1}')


async def test_listing_filters_and_pages(store: Store, db_url: str) -> None:
    runs = {}
    for key in ("k1", "k2"):
        created = await store.create_workflow(new(key), now=T0, lease=None, replace_live=False)
        runs[key] = created.record.run_id
    await store.request_cancel(runs["k1"], reason="r", now=T0, audit=note("cancel", actor="bob"))
    await store.request_cancel(
        runs["k2"], reason="r", now=T0, audit=note("cancel", on_behalf_of="carol")
    )
    await store.end_workflow(
        runs["k2"], status=S.TERMINATED, error=None, now=T0, audit=note("terminate")
    )
    assert [e.target for e in await entries(store, target="k2")] == ["k2", "k2"]
    assert [e.action for e in await entries(store, run_id=runs["k1"])] == ["cancel"]
    terminate_only = await entries(store, actions=frozenset({"terminate"}))
    assert [e.target for e in terminate_only] == ["k2"]
    # `actor` matches who acted or on whose behalf (through a server, bob is only a claim).
    assert [e.target for e in await entries(store, actor="carol")] == ["k2"]
    assert [e.target for e in await entries(store, actor="bob")] == ["k1"]
    newest, *rest = await entries(store)
    page = await entries(store, limit=1, before_seq=newest.seq)
    assert page == rest[:1]
    at = newest.at
    assert await entries(store, since=at + 60) == []
    assert len(await entries(store, until=at + 60)) == 3


def refuse_entries(db_url: str) -> None:
    """Make every insert into audit_log fail, behind the store's back."""
    if is_sqlite(db_url):
        raw_sql(
            db_url,
            "CREATE TRIGGER refuse_audit BEFORE INSERT ON audit_log "
            "BEGIN SELECT RAISE(ABORT, 'audit refused'); END",
        )
        return
    raw_sql(
        db_url,
        "CREATE FUNCTION refuse_audit() RETURNS trigger LANGUAGE plpgsql AS "
        "$$ BEGIN RAISE EXCEPTION 'audit refused'; END $$",
    )
    raw_sql(
        db_url,
        "CREATE TRIGGER refuse_audit BEFORE INSERT ON audit_log "
        "FOR EACH ROW EXECUTE FUNCTION refuse_audit()",
    )


@pytest.mark.direct_db  # it plants a trigger behind the store's back
async def test_a_change_whose_entry_cannot_be_written_does_not_happen(
    store: Store, db_url: str
) -> None:
    """The entry and the change commit or roll back together: with every audit insert
    failing, no audited verb changes anything (and an unaudited one still works)."""
    held = await running(store, "live")
    live = await run_of(store, "live")
    await store.suspend_workflow(
        live.run_id, token=held.token, error='{"message":"x"}', now=T0, next_run_at=T0 + 60
    )
    await store.put_schedule(SchedulePut(schedule=schedule(), keep_paused=False), now=T0)
    refuse_entries(db_url)
    attempts = [
        store.create_workflow(
            new("n"), now=T0, lease=None, replace_live=False, audit=note("start")
        ),
        store.request_cancel(live.run_id, reason="r", now=T0, audit=note("cancel")),
        store.retry_now(live.run_id, now=T0, audit=note("retry")),
        store.send_signal(
            "live", name="go", payload="1", dedupe_id="d", now=T0, audit=note("signal")
        ),
        store.end_workflow(
            live.run_id, status=S.TERMINATED, error=None, now=T0, audit=note("terminate")
        ),
        store.set_schedule_paused(
            SchedulePause(id="nightly", paused=True, next_tick_at=T0),
            now=T0,
            audit=note("schedule.pause"),
        ),
        store.delete_schedule("nightly", audit=note("schedule.delete")),
    ]
    for attempt in attempts:
        with pytest.raises(Exception, match="audit refused"):
            await attempt
    after = await run_of(store, "live")
    assert (after.status, after.cancel_reason, after.next_run_at) == (S.SUSPENDED, None, T0 + 60)
    assert await store.get_workflow("n") is None
    assert await store.list_signals(live.run_id) == []
    assert await store.list_cancel_requests(live.run_id) == []
    [kept] = await store.list_schedules()
    assert not kept.paused
    # Without an entry to write, the same verb goes through.
    assert await store.retry_now(live.run_id, now=T0)


def _plan(db_url: str, text: str, values: dict[str, object]) -> str:
    """The plan of ``text`` as text: SQLite's EXPLAIN QUERY PLAN, or PostgreSQL's EXPLAIN
    with sequential scans discouraged (a plan that still scans has no index to use)."""
    if is_sqlite(db_url):
        import sqlite3

        conn = sqlite3.connect(direct_url(db_url).removeprefix("sqlite:///"))
        try:
            return "\n".join(row[3] for row in conn.execute("EXPLAIN QUERY PLAN " + text, values))
        finally:
            conn.close()
    import psycopg
    from psycopg import sql

    conninfo, schema = pg_conninfo(db_url)
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
        conn.execute("SET enable_seqscan = off")
        rows = conn.execute(("EXPLAIN " + text).encode(), values).fetchall()
        return "\n".join(row[0] for row in rows)


@pytest.mark.direct_db  # it reads the plans from the database itself
async def test_a_workflow_s_entries_are_read_through_an_index(store: Store, db_url: str) -> None:
    """``describe()`` reads a workflow's entries on every call (the console refreshes it): by
    run id and by key through their indexes, never a walk of the whole trail."""
    for i in range(300):
        raw_sql(
            db_url,
            "INSERT INTO audit_log (entry_id, actor, action, run_id, target) "
            f"VALUES ('e{i}', 'a', 'cancel', 'run-{i % 100}', 'key-{i % 100}')",
        )
    raw_sql(db_url, "ANALYZE")
    dialect = "sqlite" if is_sqlite(db_url) else "postgres"
    for query, index in (
        (AuditQuery(run_id="run-7", limit=1000), "audit_log_run"),
        (AuditQuery(target="key-7", limit=50), "audit_log_target"),
    ):
        text, values = _audit.list_query(_audit.DIALECTS[dialect], query)
        plan = _plan(db_url, text, values)
        assert index in plan, plan
        assert "SCAN audit_log\n" not in plan + "\n" and "Seq Scan" not in plan, plan
