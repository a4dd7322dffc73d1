"""Store behaviour only the PostgreSQL backend has: URL options, schemas, the pool, terminated
connections, and retries after a lost acknowledgement (transient failures). Each test is
parametrized onto the postgres ``db_url`` only.
"""

from __future__ import annotations

import asyncio
import contextlib
import urllib.parse
import uuid
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest

from sagaway import errors
from sagaway.states import WorkflowStatus
from sagaway.store import Store, open_store
from tests.store_helpers import (
    LEASE,
    T0,
    lease,
    new,
    pg_conninfo,
    raw_sql,
    receive,
    run_of,
    running,
    step,
)

postgres_only = pytest.mark.parametrize("db_url", ["postgres"], indirect=True)


def test_postgres_url_options() -> None:
    from sagaway.store.postgres import PostgresStore, parse_postgres_url

    s = PostgresStore("postgresql://app:s3cret@db.example:5433/prod?schema=Tenant_1&pool_size=3")
    assert s.url == "postgresql://app@db.example:5433/prod?schema=Tenant_1&pool_size=3"
    assert "s3cret" not in s.url
    assert s.schema == "Tenant_1"
    assert s.pool_size == 3

    conninfo, schema, pool_size, shown = parse_postgres_url(
        "postgres://u@h/db?sslmode=disable&schema=x&password=pw&options=-c%20statement_timeout%3D5s"
    )
    assert (
        conninfo
        == "postgres://u@h/db?sslmode=disable&password=pw&options=-c%20statement_timeout%3D5s"
    )
    assert (schema, pool_size) == ("x", 10)
    assert "pw" not in shown
    assert parse_postgres_url("postgresql://u@h/db")[1:3] == ("sagaway", 10)

    for bad in ("1abc", "a-b", 'x"; DROP TABLE t; --', "", "a" * 64):
        with pytest.raises(ValueError, match="schema"):
            PostgresStore(f"postgresql://u@h/db?schema={urllib.parse.quote(bad)}")
    for bad in ("0", "-1", "many"):
        with pytest.raises(ValueError, match="pool_size"):
            PostgresStore(f"postgresql://u@h/db?pool_size={bad}")


@pytest.mark.postgres
@postgres_only
async def test_postgres_schema_holds_the_tables_and_isolates_data(
    db_url: str, store: Store
) -> None:
    tables = raw_sql(
        db_url,
        "SELECT table_name FROM information_schema.tables "
        "WHERE table_schema = current_schema() ORDER BY table_name",
    )
    assert [t for (t,) in tables] == [
        "attempt_errors",
        "attribute_writes",
        "audit_log",
        "cancel_requests",
        "debounced_starts",
        "outputs",
        "paused_calls",
        "queue_limits",
        "queue_slots",
        "queue_waiters",
        "schedules",
        "schema_migrations",
        "search_attributes",
        "signals",
        "steps",
        "workflows",
    ]
    await store.create_workflow(new("k1"), now=T0, lease=None, replace_live=False)

    other_schema = f"t_{uuid.uuid4().hex[:12]}"
    parts = urllib.parse.urlsplit(db_url)
    params = dict(urllib.parse.parse_qsl(parts.query), schema=other_schema)
    elsewhere = open_store(
        urllib.parse.urlunsplit(parts._replace(query=urllib.parse.urlencode(params)))
    )
    try:
        await elsewhere.open()
        assert await elsewhere.get_workflow("k1") is None
        await elsewhere.create_workflow(new("k1"), now=T0, lease=None, replace_live=False)
        assert len(await store.list_workflows(status=None, limit=10)) == 1
    finally:
        await elsewhere.close()
        raw_sql(db_url, f'DROP SCHEMA IF EXISTS "{other_schema}" CASCADE')


@pytest.mark.postgres
@postgres_only
async def test_postgres_pool_size(db_url: str) -> None:
    app = f"sagaway_pool_{uuid.uuid4().hex[:8]}"
    s = open_store(f"{db_url}&pool_size=2&application_name={app}")
    await s.open()
    try:
        await s.create_workflow(new("k1"), now=T0, lease=None, replace_live=False)
        seen: list[int] = []

        async def busy() -> None:
            await s.get_workflow("k1")
            (count,) = raw_sql(
                db_url,
                f"SELECT count(*) FROM pg_stat_activity WHERE application_name = '{app}'",
            )[0]
            seen.append(count)

        await asyncio.gather(*(busy() for _ in range(20)))
        assert 1 <= max(seen) <= 2
    finally:
        await s.close()


@pytest.mark.postgres
@postgres_only
async def test_postgres_survives_terminated_connections(db_url: str) -> None:
    app = f"sagaway_retry_{uuid.uuid4().hex[:8]}"
    s = open_store(f"{db_url}&pool_size=4&application_name={app}")
    await s.open()
    try:
        held = await running(s, "k1")
        run_id = (await run_of(s, "k1")).run_id
        await asyncio.gather(*(s.get_workflow("k1") for _ in range(8)))  # several connections

        killed = raw_sql(
            db_url,
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            f"WHERE application_name = '{app}'",
        )
        assert killed and all(ok for (ok,) in killed)

        # Every verb gets through on fresh connections.
        await s.record_step(step(run_id, "c1", T0 + 1), token=held.token)
        assert [x.call_id for x in await s.load_steps(run_id)] == ["c1"]
        created = await s.create_workflow(new("k2"), now=T0, lease=None, replace_live=False)
        assert created.created

        raw_sql(
            db_url,
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            f"WHERE application_name = '{app}'",
        )
        claimed = await s.claim_due(owner="w", now=T0 + 1, lease_timeout=LEASE, limit=5, exclude=())
        assert [r.key for r, _ in claimed] == ["k2"]
    finally:
        await s.close()


@contextlib.contextmanager
def transient_failure(
    store: Store,
    *,
    use: int,
    after_commit: bool = True,
    meanwhile: Callable[[], Awaitable[object]] | None = None,
) -> Iterator[None]:
    """Make the ``use``-th transaction (1-based) fail as if the connection dropped: after its
    COMMIT, before the acknowledgement (``after_commit``), or before it did anything.
    ``meanwhile`` runs after that COMMIT, before the retry (what another process did)."""
    import psycopg

    pool = store.pool  # type: ignore[attr-defined]
    original_get, original_put = pool.getconn, pool.putconn
    uses = [0]

    async def getconn(*args: Any, **kwargs: Any) -> Any:
        uses[0] += 1
        if uses[0] == use and not after_commit:
            raise psycopg.OperationalError("simulated: connection lost")
        return await original_get(*args, **kwargs)

    async def putconn(conn: Any) -> None:
        await original_put(conn)
        if uses[0] == use and after_commit:
            if meanwhile is not None:
                await meanwhile()
            raise psycopg.OperationalError("simulated: connection lost after COMMIT")

    pool.getconn, pool.putconn = getconn, putconn
    try:
        yield
    finally:
        del pool.getconn, pool.putconn
    assert uses[0] > use, "the transient failure was not retried"


@pytest.mark.postgres
@postgres_only
async def test_a_retried_claim_takes_more_with_tokens_no_other_claim_has(store: Store) -> None:
    """The lost attempt took one execution of three it could; another became due before the
    retry, which returns the first and takes the second under a token of its own."""
    await store.create_workflow(new("d0"), now=T0, lease=None, replace_live=False)

    async def another_becomes_due() -> None:
        await store.create_workflow(new("d1"), now=T0 + 1, lease=None, replace_live=False)

    with transient_failure(store, use=1, meanwhile=another_becomes_due):
        claimed = await store.claim_due(
            owner="w", now=T0 + 10, lease_timeout=LEASE, limit=3, exclude=()
        )
    assert [r.key for r, _ in claimed] == ["d0", "d1"]
    tokens = [held.token for _, held in claimed]
    assert len(set(tokens)) == 2
    for record, held in claimed:
        assert (await store.get_run(record.run_id)) == record
        await store.record_step(step(record.run_id, "s1", T0 + 10), token=held.token)
    # An excluded execution (one this process runs) is not claimed, due as it is.
    d2 = (await store.create_workflow(new("d2"), now=T0, lease=None, replace_live=False)).record
    excluded = [d2.run_id, *(record.run_id for record, _ in claimed)]
    assert (
        await store.claim_due(
            owner="w", now=T0 + 11, lease_timeout=LEASE, limit=3, exclude=excluded
        )
        == []
    )
    [(again, _)] = await store.claim_due(
        owner="w", now=T0 + 11, lease_timeout=LEASE, limit=3, exclude=excluded[1:]
    )
    assert again.run_id == d2.run_id


@pytest.mark.postgres
@postgres_only
async def test_a_claim_that_fails_after_its_statement_takes_nothing(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The claim's transaction is rolled back: what it had updated is due again, for anyone."""
    from sagaway.store.postgres import claims as _pg_claims

    await store.create_workflow(new("f0"), now=T0, lease=None, replace_live=False)

    async def broken(conn: Any, rows: Any) -> Any:
        raise RuntimeError("simulated: failed after the claim statement")

    with monkeypatch.context() as patch:
        patch.setattr(_pg_claims, "_within_key_limits", broken)
        with pytest.raises(RuntimeError, match="simulated"):
            await store.claim_due(owner="w", now=T0 + 10, lease_timeout=LEASE, limit=3, exclude=())
    f0 = await run_of(store, "f0")
    assert f0.status is WorkflowStatus.PENDING and f0.lease_owner is None
    [(claimed, _)] = await store.claim_due(
        owner="w", now=T0 + 10, lease_timeout=LEASE, limit=3, exclude=()
    )
    assert claimed.run_id == f0.run_id


@pytest.mark.postgres
@postgres_only
async def test_postgres_retries_after_lost_acknowledgements(store: Store) -> None:
    # create: the retry finds its own run_id and reports the creation.
    wf = new("k1")
    with transient_failure(store, use=1):
        created = await store.create_workflow(wf, now=T0, lease=None, replace_live=False)
    assert created.created and created.record.run_id == wf.run_id

    # create replacing a live execution (use 1: the fast insert finds the key taken).
    wf2 = new("k1")
    with transient_failure(store, use=2):
        replaced = await store.create_workflow(wf2, now=T0 + 1, lease=None, replace_live=True)
    assert replaced.created and replaced.record.run_id == wf2.run_id
    assert replaced.replaced_run_id == wf.run_id

    # claim_due: the retry returns what the lost attempt took, and takes no more.
    for i in range(3):
        await store.create_workflow(new(f"c{i}"), now=T0 + 2 + i, lease=None, replace_live=False)
    with transient_failure(store, use=1):
        claimed = await store.claim_due(
            owner="w", now=T0 + 10, lease_timeout=LEASE, limit=2, exclude=[replaced.record.run_id]
        )
    assert [r.key for r, _ in claimed] == ["c0", "c1"]
    for record, held in claimed:
        assert (await store.get_run(record.run_id)) == record
        await store.record_step(step(record.run_id, "s1", T0 + 10), token=held.token)
    assert (await run_of(store, "c2")).status is WorkflowStatus.PENDING

    (r0, l0), (r1, l1) = claimed
    with transient_failure(store, use=1):
        await store.record_step(step(r0.run_id, "s2", T0 + 11), token=l0.token)
    with transient_failure(store, use=1):
        assert await store.renew_leases([l0.token, l1.token], expires_at=T0 + 90) == {
            l0.token,
            l1.token,
        }

    # finish / suspend: the retry sees its own outcome instead of a lost lease.
    with transient_failure(store, use=1):
        await store.finish_workflow(
            r0.run_id,
            token=l0.token,
            status=WorkflowStatus.COMPLETED,
            result='"r"',
            error=None,
            now=T0 + 12,
            final_step=step(r0.run_id, "final", T0 + 12),
        )
    done = await store.get_run(r0.run_id)
    assert done is not None and done.status is WorkflowStatus.COMPLETED
    assert [s.call_id for s in await store.load_steps(r0.run_id)] == ["s1", "s2", "final"]
    # A retry that did not commit earlier still reports a lost lease: the recognition of "my own
    # outcome" must not match an outcome written by someone else.
    with pytest.raises(errors.LeaseLost), transient_failure(store, use=1, after_commit=False):
        await store.finish_workflow(
            r0.run_id,
            token=l0.token,
            status=WorkflowStatus.COMPLETED,
            result='"other"',
            error=None,
            now=T0 + 13,
        )
    with pytest.raises(errors.LeaseLost), transient_failure(store, use=1, after_commit=False):
        await store.suspend_workflow(
            r0.run_id, token=l0.token, error='"e"', now=T0 + 13, next_run_at=T0 + 14
        )
    assert await store.get_run(r0.run_id) == done

    with transient_failure(store, use=1):
        await store.suspend_workflow(
            r1.run_id, token=l1.token, error='"e"', now=T0 + 13, next_run_at=T0 + 600
        )
    suspended = await store.get_run(r1.run_id)
    assert suspended is not None
    assert suspended.status is WorkflowStatus.SUSPENDED and suspended.suspend_count == 1

    # retry_now / end_workflow: the retry reports the change it made.
    with transient_failure(store, use=1):
        assert await store.retry_now(r1.run_id, now=T0 + 20)
    with transient_failure(store, use=1):
        assert await store.end_workflow(
            r1.run_id, status=WorkflowStatus.CANCELLED, error=None, now=T0 + 21
        )
    assert not await store.end_workflow(
        r1.run_id, status=WorkflowStatus.CANCELLED, error=None, now=T0 + 22
    )


@pytest.mark.postgres
@postgres_only
async def test_postgres_grouped_writes_survive_lost_acknowledgements(store: Store) -> None:
    # Concurrent calls are written together in one statement, whose acknowledgement is lost
    # after its COMMIT.
    wanted = [new(f"g{i}") for i in range(6)]
    leases = [lease() for _ in wanted]
    with transient_failure(store, use=1):
        results = await asyncio.gather(
            *(
                store.create_workflow(w, now=T0, lease=held, replace_live=False)
                for w, held in zip(wanted, leases, strict=True)
            )
        )
    assert all(r.created for r in results)
    assert [r.record.run_id for r in results] == [w.run_id for w in wanted]

    with transient_failure(store, use=1):
        await asyncio.gather(
            *(
                store.record_step(step(w.run_id, "s1", T0 + 1), token=held.token)
                for w, held in zip(wanted, leases, strict=True)
            )
        )
    with transient_failure(store, use=1):
        await asyncio.gather(
            *(
                store.finish_workflow(
                    w.run_id,
                    token=held.token,
                    status=WorkflowStatus.COMPLETED,
                    result='"r"',
                    error=None,
                    now=T0 + 2,
                    final_step=step(w.run_id, "s2", T0 + 2),
                    has_parent=False,
                )
                for w, held in zip(wanted, leases, strict=True)
            )
        )
    for w in wanted:
        record = await store.get_run(w.run_id)
        assert record is not None and record.status is WorkflowStatus.COMPLETED
        assert [s.call_id for s in await store.load_steps(w.run_id)] == ["s1", "s2"]


@pytest.mark.postgres
@postgres_only
async def test_postgres_durable_waits_survive_lost_acknowledgements(store: Store) -> None:
    held = await running(store, "k1")
    run_id = (await run_of(store, "k1")).run_id

    # send without dedupe_id: stored once, reported stored.
    with transient_failure(store, use=1):
        _, stored = await store.send_signal(
            "k1", name="approve", payload="p1", dedupe_id=None, now=T0 + 1
        )
    assert stored
    assert [s.payload for s in await store.list_signals(run_id)] == ["p1"]

    # receive: the retry returns the signal the lost attempt consumed, not the next one.
    await store.send_signal("k1", name="approve", payload="p2", dedupe_id=None, now=T0 + 2)
    with transient_failure(store, use=1):
        assert await receive(store, run_id, held.token, call_id="c1", now=T0 + 3) == "p1"
    signals = await store.list_signals(run_id)
    assert [(s.payload, s.consumed_call) for s in signals] == [("p1", "c1"), ("p2", None)]

    # receive that starts waiting: the retry reports the wait, not a lost lease.
    assert await receive(store, run_id, held.token, call_id="c2", now=T0 + 4) == "p2"
    with transient_failure(store, use=1):
        got = await receive(
            store, run_id, held.token, call_id="c3", wait=True, deadline=T0 + 50, now=T0 + 5
        )
    assert got is None
    assert (await run_of(store, "k1")).status is WorkflowStatus.WAITING

    # wait_workflow and wait_for_child likewise.
    [(_, again)] = await store.claim_due(
        owner="w", now=T0 + 50, lease_timeout=LEASE, limit=9, exclude=()
    )
    with transient_failure(store, use=1):
        await store.wait_workflow(
            run_id,
            token=again.token,
            waiting_for="timer",
            next_run_at=T0 + 60,
            step=None,
            now=T0 + 51,
        )
    assert (await run_of(store, "k1")).next_run_at == T0 + 60
    [(_, third)] = await store.claim_due(
        owner="w", now=T0 + 60, lease_timeout=LEASE, limit=9, exclude=()
    )
    child = await store.create_workflow(
        new("kid", parent_key="k1"), now=T0 + 60, lease=lease(), replace_live=False
    )
    with transient_failure(store, use=1):
        seen = await store.wait_for_child(
            run_id, token=third.token, child_key="kid", wait=True, now=T0 + 61
        )
    assert seen == child.record
    parent = await run_of(store, "k1")
    assert parent.status is WorkflowStatus.WAITING and parent.next_run_at is None


@pytest.mark.postgres
@postgres_only
@pytest.mark.parametrize("dedupe_id", [None, "cb-1"])
async def test_postgres_send_retried_after_the_signal_ended_the_workflow_reports_it_stored(
    store: Store, dedupe_id: str | None
) -> None:
    # The send commits, its acknowledgement is lost, and the workflow receives the signal and
    # ends before the retry. The retry must report the signal stored, not "ended, not sent".
    await running(store, "k1")
    run_id = (await run_of(store, "k1")).run_id

    async def ended_meanwhile() -> None:
        await store.end_workflow(run_id, status=WorkflowStatus.CANCELLED, error=None, now=T0 + 2)

    with transient_failure(store, use=1, meanwhile=ended_meanwhile):
        record, stored = await store.send_signal(
            "k1", name="approve", payload="p1", dedupe_id=dedupe_id, now=T0 + 1
        )
    assert record is not None and record.status is WorkflowStatus.CANCELLED
    assert stored
    assert [s.payload for s in await store.list_signals(run_id)] == ["p1"]
    # A later send of the same dedupe_id is not this one: not stored.
    _, again = await store.send_signal(
        "k1", name="approve", payload="p1", dedupe_id=dedupe_id, now=T0 + 3
    )
    assert not again


@pytest.mark.postgres
@postgres_only
async def test_postgres_batched_end_wakes_a_waiter_that_committed_while_it_waited_for_the_row(
    db_url: str, store: Store
) -> None:
    # The waiter's decision, held open: it share-locks the child's row (as wait_for_child
    # does), the child's batched end blocks on that lock, then the waiter commits WAITING.
    # A statement's snapshot is taken before it blocks, so the end must look for waiters in a
    # statement of its own after the row is locked; a single statement would miss this one.
    import psycopg
    from psycopg import sql

    held = await running(store, "waiter")
    waiter_id = (await run_of(store, "waiter")).run_id
    child_lease = lease("worker-b")
    child = await store.create_workflow(new("top"), now=T0, lease=child_lease, replace_live=False)
    conninfo, schema = pg_conninfo(db_url)
    async with await psycopg.AsyncConnection.connect(conninfo) as decision:
        await decision.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
        await decision.execute("SELECT 1 FROM workflows WHERE key = 'top' AND is_current FOR SHARE")
        end = asyncio.ensure_future(
            store.finish_workflow(
                child.record.run_id,
                token=child_lease.token,
                status=WorkflowStatus.COMPLETED,
                result=None,
                error=None,
                now=T0 + 6,
                has_parent=False,
            )
        )
        for _ in range(500):  # until the end waits for the share lock (bounded)
            (blocked,) = raw_sql(
                db_url,
                "SELECT count(*) FROM pg_stat_activity "
                "WHERE wait_event_type = 'Lock' AND datname = current_database()",
            )[0]
            if blocked:
                break
            await asyncio.sleep(0.01)
        else:
            raise AssertionError("the end never waited for the waiter's lock")
        assert not end.done()
        await decision.execute(
            "UPDATE workflows SET status = 'WAITING', waiting_for = 'child:top', "
            "lease_token = NULL, lease_owner = NULL, lease_expires_at = NULL, "
            "next_run_at = NULL WHERE run_id = %s AND lease_token = %s",
            (waiter_id, held.token),
        )
        await decision.commit()
        await asyncio.wait_for(end, 10)
    waiter = await run_of(store, "waiter")
    assert waiter.status is WorkflowStatus.WAITING
    assert waiter.next_run_at == T0 + 6, "lost wake-up"
