"""The Store contract, verb by verb, on every backend (the ``db_url`` fixture: SQLite and
PostgreSQL). Times are explicit (``now``), as the engine passes them, so no test sleeps.

The last section holds PostgreSQL-only behaviour (URL handling, schemas, transient-failure
retries), parametrized onto the postgres ``db_url`` only.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import urllib.parse
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from sagaway import errors
from sagaway.states import StepKind, StepStatus, WorkflowStatus
from sagaway.store import Store, open_store
from sagaway.store.migrations import latest_version
from sagaway.store.records import (
    Lease,
    NewWorkflow,
    SignalRecord,
    StepRecord,
    WorkflowRecord,
)

T0 = 1_700_000_000.0
LEASE = 30.0


# ---------------------------------------------------------------------------- helpers


def new(key: str = "order-1", run_id: str | None = None, **kw: Any) -> NewWorkflow:
    return NewWorkflow(
        run_id=run_id or uuid.uuid4().hex,
        key=key,
        name=kw.pop("name", "place_order"),
        args=kw.pop("args", '{"order": 1}'),
        args_hash=kw.pop("args_hash", "h1"),
        parent_key=kw.pop("parent_key", None),
    )


def lease(owner: str = "worker-a", expires_at: float = T0 + LEASE) -> Lease:
    return Lease(uuid.uuid4().hex, owner, expires_at)


def step(
    run_id: str,
    call_id: str,
    started_at: float,
    *,
    status: StepStatus = StepStatus.COMPLETED,
    attempts: int = 1,
    result: str | None = '"ok"',
    error: str | None = None,
    ended_at: float | None = None,
    kind: StepKind = StepKind.ACTIVITY,
    name: str = "charge",
) -> StepRecord:
    return StepRecord(
        run_id=run_id,
        call_id=call_id,
        kind=kind,
        name=name,
        status=status,
        attempts=attempts,
        result=result,
        error=error,
        started_at=started_at,
        ended_at=ended_at,
    )


async def running(store: Store, key: str, *, now: float = T0, owner: str = "worker-a") -> Lease:
    """Create ``key`` RUNNING under a fresh lease that expires at now + LEASE."""
    held = lease(owner, now + LEASE)
    result = await store.create_workflow(new(key), now=now, lease=held, replace_live=False)
    assert result.created
    return held


async def run_of(store: Store, key: str) -> WorkflowRecord:
    record = await store.get_workflow(key)
    assert record is not None
    return record


def is_sqlite(db_url: str) -> bool:
    return db_url.startswith("sqlite")


def raw_sql(db_url: str, statement: str) -> list[tuple[Any, ...]]:
    """Run one statement on the test database behind the store's back."""
    if is_sqlite(db_url):
        lite = sqlite3.connect(db_url.removeprefix("sqlite:///"))
        try:
            rows = lite.execute(statement).fetchall()
            lite.commit()
            return rows
        finally:
            lite.close()
    import psycopg
    from psycopg import sql

    parts = urllib.parse.urlsplit(db_url)
    params = dict(urllib.parse.parse_qsl(parts.query))
    schema = params.pop("schema")
    conninfo = urllib.parse.urlunsplit(parts._replace(query=urllib.parse.urlencode(params)))
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
        cur = conn.execute(statement.encode())
        return cur.fetchall() if cur.description else []


@pytest.fixture
async def store(db_url: str) -> AsyncIterator[Store]:
    s = open_store(db_url)
    await s.open()
    try:
        yield s
    finally:
        await s.close()


@pytest.fixture
async def other(db_url: str, store: Store) -> AsyncIterator[Store]:
    """A second store on the same database (another process, as far as the data goes)."""
    s = open_store(db_url)
    await s.open()
    try:
        yield s
    finally:
        await s.close()


# ---------------------------------------------------------------------------- create


async def test_create_new_pending(store: Store) -> None:
    wf = new("k1", parent_key="parent-1")
    result = await store.create_workflow(wf, now=T0, lease=None, replace_live=False)

    assert result.created is True
    assert result.replaced_run_id is None
    assert result.record == WorkflowRecord(
        run_id=wf.run_id,
        key="k1",
        name="place_order",
        args='{"order": 1}',
        args_hash="h1",
        status=WorkflowStatus.PENDING,
        result=None,
        error=None,
        parent_key="parent-1",
        created_at=T0,
        updated_at=T0,
        ended_at=None,
        lease_owner=None,
        lease_expires_at=None,
        next_run_at=T0,
        suspend_count=0,
    )
    assert await store.get_workflow("k1") == result.record
    assert await store.get_run(wf.run_id) == result.record


async def test_create_with_lease_starts_running_and_owned(store: Store) -> None:
    held = lease("worker-a", T0 + 5)
    result = await store.create_workflow(new("k1"), now=T0, lease=held, replace_live=False)

    assert result.created
    assert result.record.status is WorkflowStatus.RUNNING
    assert result.record.lease_owner == "worker-a"
    assert result.record.lease_expires_at == T0 + 5
    # The lease is usable at once for fenced writes.
    await store.record_step(step(result.record.run_id, "c1", T0), token=held.token)
    assert len(await store.load_steps(result.record.run_id)) == 1


async def test_create_existing_key_returns_existing(store: Store) -> None:
    first = await store.create_workflow(new("k1"), now=T0, lease=None, replace_live=False)
    second_wf = new("k1", args='{"order": 2}', args_hash="h2")
    second = await store.create_workflow(second_wf, now=T0 + 1, lease=lease(), replace_live=False)

    assert second.created is False
    assert second.replaced_run_id is None
    assert second.record == first.record
    assert await store.get_workflow("k1") == first.record
    assert await store.get_run(second_wf.run_id) is None


async def test_create_replace_live_terminates_the_live_one(store: Store) -> None:
    old_lease = await running(store, "k1")
    old = await run_of(store, "k1")
    wf = new("k1")

    result = await store.create_workflow(wf, now=T0 + 3, lease=None, replace_live=True)

    assert result.created is True
    assert result.replaced_run_id == old.run_id
    assert result.record.run_id == wf.run_id
    assert result.record.status is WorkflowStatus.PENDING
    assert await store.get_workflow("k1") == result.record
    replaced = await store.get_run(old.run_id)
    assert replaced is not None
    assert replaced.status is WorkflowStatus.TERMINATED
    assert replaced.ended_at == T0 + 3
    assert replaced.updated_at == T0 + 3
    assert replaced.lease_owner is None and replaced.lease_expires_at is None
    assert replaced.next_run_at is None
    assert replaced.error is not None and wf.run_id in replaced.error
    # Exactly one current execution under the key; the old owner is fenced off.
    listed = await store.list_workflows(status=None, limit=100)
    assert [r.run_id for r in listed] == [wf.run_id]
    assert await store.count_by_status() == {WorkflowStatus.PENDING: 1}
    with pytest.raises(errors.LeaseLost):
        await store.record_step(step(old.run_id, "c1", T0 + 4), token=old_lease.token)
    assert await store.load_steps(old.run_id) == []


async def test_create_replace_live_leaves_an_ended_execution(store: Store) -> None:
    held = await running(store, "k1")
    done = await run_of(store, "k1")
    await store.finish_workflow(
        done.run_id,
        token=held.token,
        status=WorkflowStatus.COMPLETED,
        result='"r"',
        error=None,
        now=T0 + 1,
    )
    done = await run_of(store, "k1")
    wf = new("k1")

    result = await store.create_workflow(wf, now=T0 + 2, lease=None, replace_live=True)

    assert result.created is False
    assert result.replaced_run_id is None
    assert result.record == done
    assert await store.get_run(wf.run_id) is None


async def test_create_with_own_run_id_counts_as_created(store: Store) -> None:
    # A create retried after a commit whose acknowledgement was lost finds its own run_id: that
    # is its creation, not someone else's (and it must not terminate itself under replace_live).
    wf = new("k1")
    first = await store.create_workflow(wf, now=T0, lease=None, replace_live=False)

    again = await store.create_workflow(wf, now=T0 + 1, lease=None, replace_live=False)
    assert again.created is True
    assert again.record == first.record

    again = await store.create_workflow(wf, now=T0 + 2, lease=None, replace_live=True)
    assert again.created is True
    assert again.replaced_run_id is None
    assert again.record == first.record
    assert await run_of(store, "k1") == first.record


async def test_concurrent_creates_of_one_key_make_one_execution(store: Store, other: Store) -> None:
    wfs = [new("hot-key") for _ in range(20)]
    results = await asyncio.gather(
        *(
            (store if i % 2 else other).create_workflow(
                wf, now=T0 + i, lease=None, replace_live=False
            )
            for i, wf in enumerate(wfs)
        )
    )

    assert sum(r.created for r in results) == 1
    winner = next(r.record for r in results if r.created)
    assert {r.record.run_id for r in results} == {winner.run_id}
    assert all(r.record == winner for r in results)
    assert await run_of(store, "hot-key") == winner
    for wf in wfs:
        if wf.run_id != winner.run_id:
            assert await store.get_run(wf.run_id) is None
    assert await store.count_by_status() == {WorkflowStatus.PENDING: 1}


async def test_concurrent_replacing_creates_keep_one_current_execution(
    store: Store, other: Store
) -> None:
    await store.create_workflow(new("hot-key"), now=T0, lease=None, replace_live=False)
    wfs = [new("hot-key") for _ in range(10)]
    results = await asyncio.gather(
        *(
            (store if i % 2 else other).create_workflow(
                wf, now=T0 + 1, lease=None, replace_live=True
            )
            for i, wf in enumerate(wfs)
        )
    )

    assert all(r.created for r in results)
    current = await run_of(store, "hot-key")
    assert current.run_id in {wf.run_id for wf in wfs}
    assert current.status is WorkflowStatus.PENDING
    for wf in wfs:
        if wf.run_id != current.run_id:
            loser = await store.get_run(wf.run_id)
            assert loser is not None and loser.status is WorkflowStatus.TERMINATED
    # Each replaced execution was replaced exactly once.
    replaced = [r.replaced_run_id for r in results]
    assert None not in replaced
    assert len(set(replaced)) == len(replaced)
    assert await store.count_by_status() == {WorkflowStatus.PENDING: 1}
    assert len(await store.list_workflows(status=None, limit=100)) == 1


# ---------------------------------------------------------------------------- read


async def test_get_unknown(store: Store) -> None:
    assert await store.get_workflow("nope") is None
    assert await store.get_run("nope") is None
    assert await store.load_steps("nope") == []
    assert await store.list_workflows(status=None, limit=10) == []
    assert await store.count_by_status() == {}


async def test_list_and_count(store: Store) -> None:
    k1 = await store.create_workflow(new("k1"), now=T0, lease=None, replace_live=False)
    await store.create_workflow(new("k2"), now=T0 + 1, lease=lease(), replace_live=False)
    await store.create_workflow(new("k3"), now=T0 + 2, lease=None, replace_live=False)
    # Same creation time: ties are ordered by run_id.
    await store.create_workflow(
        new("k4", run_id="b-run"), now=T0 + 3, lease=None, replace_live=False
    )
    await store.create_workflow(
        new("k5", run_id="a-run"), now=T0 + 3, lease=None, replace_live=False
    )
    k1_new = await store.create_workflow(new("k1"), now=T0 + 4, lease=None, replace_live=True)
    assert k1_new.replaced_run_id == k1.record.run_id

    listed = await store.list_workflows(status=None, limit=100)
    assert [r.key for r in listed] == ["k1", "k5", "k4", "k3", "k2"]
    assert listed[0].run_id == k1_new.record.run_id  # the superseded row is not listed
    assert [r.key for r in await store.list_workflows(status=None, limit=2)] == ["k1", "k5"]
    pending = await store.list_workflows(status=WorkflowStatus.PENDING, limit=100)
    assert [r.key for r in pending] == ["k1", "k5", "k4", "k3"]
    running_ = await store.list_workflows(status=WorkflowStatus.RUNNING, limit=100)
    assert [r.key for r in running_] == ["k2"]
    assert await store.list_workflows(status=WorkflowStatus.TERMINATED, limit=100) == []
    assert await store.list_workflows(status=WorkflowStatus.PENDING, limit=0) == []
    # Only current executions are counted (the terminated predecessor of k1 is not).
    assert await store.count_by_status() == {
        WorkflowStatus.PENDING: 4,
        WorkflowStatus.RUNNING: 1,
    }


# ---------------------------------------------------------------------------- steps


async def test_record_step_upserts_and_load_steps_orders(store: Store) -> None:
    held = await running(store, "k1")
    run_id = (await run_of(store, "k1")).run_id
    other_lease = await running(store, "k2")
    other_run = (await run_of(store, "k2")).run_id

    await store.record_step(step(run_id, "c2", T0 + 2), token=held.token)
    await store.record_step(
        step(run_id, "c1", T0 + 1, status=StepStatus.RETRYING, result=None, error='"e"'),
        token=held.token,
    )
    await store.record_step(step(run_id, "c0b", T0 + 1.5), token=held.token)
    await store.record_step(step(run_id, "c0a", T0 + 1.5), token=held.token)
    await store.record_step(step(other_run, "c1", T0), token=other_lease.token)

    steps = await store.load_steps(run_id)
    assert [s.call_id for s in steps] == ["c1", "c0a", "c0b", "c2"]
    assert steps[0] == step(
        run_id, "c1", T0 + 1, status=StepStatus.RETRYING, result=None, error='"e"'
    )

    # Upsert: everything but started_at is replaced.
    final = step(
        run_id,
        "c1",
        T0 + 9,
        status=StepStatus.COMPLETED,
        attempts=2,
        result='"done"',
        error=None,
        ended_at=T0 + 3,
        kind=StepKind.COMPENSATION,
        name="refund",
    )
    await store.record_step(final, token=held.token)
    steps = await store.load_steps(run_id)
    assert [s.call_id for s in steps] == ["c1", "c0a", "c0b", "c2"]
    assert steps[0] == StepRecord(
        run_id=run_id,
        call_id="c1",
        kind=StepKind.COMPENSATION,
        name="refund",
        status=StepStatus.COMPLETED,
        attempts=2,
        result='"done"',
        error=None,
        started_at=T0 + 1,
        ended_at=T0 + 3,
    )
    assert [s.call_id for s in await store.load_steps(other_run)] == ["c1"]


# ---------------------------------------------------------------------------- fencing


async def test_load_steps_many_reads_each_execution_in_order(store: Store) -> None:
    runs = []
    for key in ("k1", "k2", "k3"):
        held = await running(store, key)
        runs.append(((await run_of(store, key)).run_id, held))
    (r1, l1), (r2, l2), (r3, _) = runs
    await store.record_step(step(r1, "2", T0 + 2), token=l1.token)
    await store.record_step(step(r1, "1", T0 + 1), token=l1.token)
    await store.record_step(step(r2, "1", T0 + 3, result='"two"'), token=l2.token)

    found = await store.load_steps_many([r1, r2, r3, "no-such-run"])
    assert set(found) == {r1, r2}  # no steps, no entry
    assert found[r1] == await store.load_steps(r1)
    assert [s.call_id for s in found[r1]] == ["1", "2"]
    assert [(s.call_id, s.result) for s in found[r2]] == [("1", '"two"')]
    assert await store.load_steps_many([]) == {}


async def test_fenced_writes_with_a_wrong_token_write_nothing(store: Store) -> None:
    await running(store, "k1")
    before = await run_of(store, "k1")
    run_id = before.run_id

    with pytest.raises(errors.LeaseLost, match=f"^lost ownership of run {run_id}$") as lost:
        await store.record_step(step(run_id, "c1", T0), token="not-the-token")
    assert lost.value.run_id == run_id
    with pytest.raises(errors.LeaseLost):
        await store.finish_workflow(
            run_id,
            token="not-the-token",
            status=WorkflowStatus.COMPLETED,
            result='"r"',
            error=None,
            now=T0 + 1,
            final_step=step(run_id, "final", T0 + 1),
        )
    with pytest.raises(errors.LeaseLost):
        await store.suspend_workflow(
            run_id, token="not-the-token", error='"e"', now=T0 + 1, next_run_at=T0 + 60
        )

    assert await store.load_steps(run_id) == []
    assert await store.get_run(run_id) == before


async def test_fenced_writes_need_a_running_execution(store: Store) -> None:
    pending = await store.create_workflow(new("k1"), now=T0, lease=None, replace_live=False)
    with pytest.raises(errors.LeaseLost):
        await store.record_step(step(pending.record.run_id, "c1", T0), token="any")
    with pytest.raises(errors.LeaseLost):
        await store.record_step(step("no-such-run", "c1", T0), token="any")
    with pytest.raises(errors.LeaseLost):
        await store.suspend_workflow(
            "no-such-run", token="any", error='"e"', now=T0, next_run_at=T0
        )
    with pytest.raises(errors.LeaseLost):
        await store.finish_workflow(
            "no-such-run",
            token="any",
            status=WorkflowStatus.COMPLETED,
            result=None,
            error=None,
            now=T0,
        )
    assert await store.load_steps(pending.record.run_id) == []


async def test_finish_unknown_run_with_final_step_is_lease_lost(store: Store) -> None:
    with pytest.raises(errors.LeaseLost):
        await store.finish_workflow(
            "no-such-run",
            token="any",
            status=WorkflowStatus.COMPLETED,
            result=None,
            error=None,
            now=T0,
            final_step=step("no-such-run", "final", T0),
        )


async def test_stale_token_after_takeover(store: Store, other: Store) -> None:
    stale = await running(store, "k1")  # expires at T0 + LEASE; the owner then stalls
    run_id = (await run_of(store, "k1")).run_id
    await store.record_step(step(run_id, "c1", T0 + 1), token=stale.token)

    [(record, fresh)] = await other.claim_due(
        owner="worker-b", now=T0 + LEASE, lease_timeout=LEASE, limit=10, exclude=()
    )
    assert record.run_id == run_id
    assert record.lease_owner == "worker-b"

    with pytest.raises(errors.LeaseLost):
        await store.record_step(step(run_id, "c2", T0 + 31), token=stale.token)
    with pytest.raises(errors.LeaseLost):
        await store.record_step(
            step(run_id, "c1", T0 + 31, result='"overwritten"'), token=stale.token
        )
    with pytest.raises(errors.LeaseLost):
        await store.suspend_workflow(
            run_id, token=stale.token, error='"e"', now=T0 + 31, next_run_at=T0 + 90
        )
    with pytest.raises(errors.LeaseLost):
        await store.finish_workflow(
            run_id,
            token=stale.token,
            status=WorkflowStatus.FAILED,
            result=None,
            error='"stale"',
            now=T0 + 31,
            final_step=step(run_id, "c9", T0 + 31),
        )
    steps = await store.load_steps(run_id)
    assert [(s.call_id, s.result) for s in steps] == [("c1", '"ok"')]
    current = await store.get_run(run_id)
    assert current == record

    # The new owner writes normally.
    await other.record_step(step(run_id, "c2", T0 + 32), token=fresh.token)
    assert [s.call_id for s in await store.load_steps(run_id)] == ["c1", "c2"]


async def test_concurrent_starts_and_ends_are_each_decided_alone(store: Store) -> None:
    """Starts and ends made at once (grouped where the store batches them) get the answer each
    would get alone: one execution per key, and only the owner ends a run."""
    wanted = [new(f"k{i}") for i in range(8)] + [new("k3"), new("k5")]
    leases = [lease() for _ in wanted]
    results = await asyncio.gather(
        *(
            store.create_workflow(w, now=T0, lease=held, replace_live=False)
            for w, held in zip(wanted, leases, strict=True)
        )
    )
    by_key: dict[str, list[Any]] = {}
    for w, held, result in zip(wanted, leases, results, strict=True):
        by_key.setdefault(w.key, []).append((w, held, result))
    owners: list[tuple[str, Lease]] = []
    for key, tries in by_key.items():
        assert sum(r.created for _, _, r in tries) == 1, key
        winner = next((w, held) for w, held, r in tries if r.created)
        assert all(r.record.run_id == winner[0].run_id for _, _, r in tries)
        assert (await run_of(store, key)).status is WorkflowStatus.RUNNING
        owners.append((winner[0].run_id, winner[1]))

    async def end(i: int, run_id: str, held: Lease) -> str:
        token = held.token if i % 2 else "stale-token"
        try:
            await store.finish_workflow(
                run_id,
                token=token,
                status=WorkflowStatus.COMPLETED,
                result=f'"done-{i}"',
                error=None,
                now=T0 + 1,
                final_step=step(run_id, "last", T0 + 0.5, result=f'"{i}"') if i % 4 else None,
                has_parent=False,
            )
        except errors.LeaseLost:
            return "lost"
        return "ended"

    outcomes = await asyncio.gather(*(end(i, r, h) for i, (r, h) in enumerate(owners)))
    for i, ((run_id, _), outcome) in enumerate(zip(owners, outcomes, strict=True)):
        record = await store.get_run(run_id)
        assert record is not None
        steps = await store.load_steps(run_id)
        if i % 2 == 0:
            assert outcome == "lost" and record.status is WorkflowStatus.RUNNING and steps == []
            continue
        assert outcome == "ended" and record.status is WorkflowStatus.COMPLETED
        assert record.result == f'"done-{i}"' and record.ended_at == T0 + 1
        assert [(s.call_id, s.result) for s in steps] == ([("last", f'"{i}"')] if i % 4 else [])


async def test_large_payloads_are_written_alone_and_fenced(store: Store) -> None:
    """Steps and ends whose payload is too large to share a batch take their own statement,
    with the same fencing."""
    big = '"' + "x" * 100_000 + '"'
    held = await running(store, "k1")
    run_id = (await run_of(store, "k1")).run_id
    with pytest.raises(errors.LeaseLost):
        await store.record_step(step(run_id, "c1", T0, result=big), token="stale-token")
    await store.record_step(step(run_id, "c1", T0, result=big), token=held.token)
    with pytest.raises(errors.LeaseLost):
        await store.finish_workflow(
            run_id,
            token="stale-token",
            status=WorkflowStatus.COMPLETED,
            result=big,
            error=None,
            now=T0 + 1,
            has_parent=False,
        )
    await store.finish_workflow(
        run_id,
        token=held.token,
        status=WorkflowStatus.COMPLETED,
        result=big,
        error=None,
        now=T0 + 1,
        final_step=step(run_id, "c2", T0 + 1, result=big),
        has_parent=False,
    )
    record = await store.get_run(run_id)
    assert record is not None and record.status is WorkflowStatus.COMPLETED
    assert record.result == big
    assert [(s.call_id, s.result) for s in await store.load_steps(run_id)] == [
        ("c1", big),
        ("c2", big),
    ]


async def test_concurrent_step_writes_keep_every_outcome_and_fence_each(store: Store) -> None:
    """Many steps written at once (grouped into shared statements where the store batches):
    each owned step lands exactly as given, each one with a stale token fails alone, and a
    repeated call id keeps its last write."""
    runs: list[tuple[str, str]] = []
    for i in range(12):
        held = await running(store, f"k{i}")
        runs.append(((await run_of(store, f"k{i}")).run_id, held.token))
    odd = '{"text": "quote \' backslash \\\\ unicode é ✓", "n": 1.5e-300}'

    async def write(run_id: str, token: str, call_id: str, result: str) -> str:
        try:
            await store.record_step(
                step(run_id, call_id, T0 + 0.125, result=result, ended_at=T0 + 0.25),
                token=token,
            )
        except errors.LeaseLost:
            return "lost"
        return "ok"

    writes = []
    for i, (run_id, token) in enumerate(runs):
        good = token if i % 3 else "stale-token"
        writes += [write(run_id, good, f"c{j}", f'"{i}-{j}"') for j in range(5)]
        writes.append(write(run_id, good, "c0", odd))  # the same call id again, last wins
    outcomes = await asyncio.gather(*writes)

    for i, (run_id, _) in enumerate(runs):
        mine = outcomes[i * 6 : i * 6 + 6]
        steps = await store.load_steps(run_id)
        if i % 3 == 0:
            assert mine == ["lost"] * 6
            assert steps == []
            continue
        assert mine == ["ok"] * 6
        assert {s.call_id: s.result for s in steps} == {
            "c0": odd,
            **{f"c{j}": f'"{i}-{j}"' for j in range(1, 5)},
        }
        assert all(s.started_at == T0 + 0.125 and s.ended_at == T0 + 0.25 for s in steps)


async def test_finish_completed_records_result_and_final_step(store: Store) -> None:
    held = await running(store, "k1")
    run_id = (await run_of(store, "k1")).run_id

    await store.finish_workflow(
        run_id,
        token=held.token,
        status=WorkflowStatus.COMPLETED,
        result='{"total": 3}',
        error=None,
        now=T0 + 7,
        final_step=step(run_id, "final", T0 + 6, ended_at=T0 + 7),
    )

    record = await store.get_run(run_id)
    assert record is not None
    assert record.status is WorkflowStatus.COMPLETED
    assert record.result == '{"total": 3}'
    assert record.error is None
    assert record.ended_at == T0 + 7
    assert record.updated_at == T0 + 7
    assert record.lease_owner is None and record.lease_expires_at is None
    assert record.next_run_at is None
    assert await store.load_steps(run_id) == [step(run_id, "final", T0 + 6, ended_at=T0 + 7)]
    # Ended: the token owns nothing any more.
    with pytest.raises(errors.LeaseLost):
        await store.record_step(step(run_id, "late", T0 + 8), token=held.token)
    with pytest.raises(errors.LeaseLost):
        await store.finish_workflow(
            run_id,
            token=held.token,
            status=WorkflowStatus.FAILED,
            result=None,
            error='"again"',
            now=T0 + 8,
        )
    assert await store.get_run(run_id) == record
    assert await store.renew_leases([held.token], expires_at=T0 + 100) == set()


async def test_finish_failed(store: Store) -> None:
    held = await running(store, "k1")
    run_id = (await run_of(store, "k1")).run_id
    await store.finish_workflow(
        run_id,
        token=held.token,
        status=WorkflowStatus.FAILED,
        result=None,
        error='{"kind": "completable"}',
        now=T0 + 2,
    )
    record = await run_of(store, "k1")
    assert record.status is WorkflowStatus.FAILED
    assert record.error == '{"kind": "completable"}'
    assert record.result is None
    assert record.ended_at == T0 + 2
    assert await store.load_steps(run_id) == []


async def test_suspend(store: Store) -> None:
    held = await running(store, "k1")
    run_id = (await run_of(store, "k1")).run_id

    await store.suspend_workflow(
        run_id, token=held.token, error='{"kind": "incompletable"}', now=T0 + 2, next_run_at=T0 + 60
    )

    record = await run_of(store, "k1")
    assert record.status is WorkflowStatus.SUSPENDED
    assert record.error == '{"kind": "incompletable"}'
    assert record.updated_at == T0 + 2
    assert record.next_run_at == T0 + 60
    assert record.suspend_count == 1
    assert record.ended_at is None
    assert record.lease_owner is None and record.lease_expires_at is None
    with pytest.raises(errors.LeaseLost):
        await store.suspend_workflow(
            run_id, token=held.token, error='"again"', now=T0 + 3, next_run_at=T0 + 70
        )
    assert await run_of(store, "k1") == record

    # Suspended again after the next claim: the count goes on.
    [(_, again)] = await store.claim_due(
        owner="worker-b", now=T0 + 60, lease_timeout=LEASE, limit=5, exclude=()
    )
    await store.suspend_workflow(
        run_id, token=again.token, error='"e2"', now=T0 + 61, next_run_at=T0 + 120
    )
    assert (await run_of(store, "k1")).suspend_count == 2


# ---------------------------------------------------------------------------- claim_due


async def test_claim_due_takes_pending_in_due_order(store: Store) -> None:
    created = [
        (await store.create_workflow(new(f"k{i}"), now=T0 + i, lease=None, replace_live=False))
        for i in (2, 0, 1)
    ]
    by_key = {c.record.key: c.record for c in created}
    now = T0 + 10

    claimed = await store.claim_due(
        owner="worker-a", now=now, lease_timeout=LEASE, limit=10, exclude=()
    )

    assert [r.key for r, _ in claimed] == ["k0", "k1", "k2"]
    tokens = {held.token for _, held in claimed}
    assert len(tokens) == 3
    for record, held in claimed:
        assert held.owner == "worker-a"
        assert held.expires_at == now + LEASE
        assert record.status is WorkflowStatus.RUNNING
        assert record.lease_owner == "worker-a"
        assert record.lease_expires_at == now + LEASE
        assert record.updated_at == now
        assert record.created_at == by_key[record.key].created_at
        assert await store.get_run(record.run_id) == record
        await store.record_step(step(record.run_id, "c1", now), token=held.token)
    # Leased now: nobody else gets them until the leases expire.
    assert (
        await store.claim_due(owner="worker-b", now=now, lease_timeout=LEASE, limit=10, exclude=())
        == []
    )
    assert (
        await store.claim_due(
            owner="worker-b", now=now + LEASE - 0.001, lease_timeout=LEASE, limit=10, exclude=()
        )
        == []
    )


async def test_claim_due_waits_for_next_run_at(store: Store) -> None:
    await store.create_workflow(new("k1"), now=T0 + 100, lease=None, replace_live=False)
    assert (
        await store.claim_due(owner="w", now=T0 + 99, lease_timeout=LEASE, limit=10, exclude=())
        == []
    )
    claimed = await store.claim_due(
        owner="w", now=T0 + 100, lease_timeout=LEASE, limit=10, exclude=()
    )
    assert [r.key for r, _ in claimed] == ["k1"]


async def test_claim_due_takes_over_expired_leases(store: Store) -> None:
    held = await running(store, "k1", owner="worker-a")  # expires at T0 + LEASE
    run_id = (await run_of(store, "k1")).run_id

    assert (
        await store.claim_due(
            owner="worker-b", now=T0 + LEASE - 1, lease_timeout=LEASE, limit=10, exclude=()
        )
        == []
    )
    [(record, taken)] = await store.claim_due(
        owner="worker-b", now=T0 + LEASE, lease_timeout=LEASE, limit=10, exclude=()
    )
    assert record.run_id == run_id
    assert taken.token != held.token
    assert taken.expires_at == T0 + 2 * LEASE
    assert record.lease_owner == "worker-b"
    assert await store.renew_leases([held.token, taken.token], expires_at=T0 + 99) == {taken.token}


async def test_claim_due_suspended_when_due(store: Store) -> None:
    held = await running(store, "k1")
    run_id = (await run_of(store, "k1")).run_id
    await store.suspend_workflow(
        run_id, token=held.token, error='"e"', now=T0 + 1, next_run_at=T0 + 60
    )

    assert (
        await store.claim_due(owner="w", now=T0 + 59, lease_timeout=LEASE, limit=10, exclude=())
        == []
    )
    [(record, taken)] = await store.claim_due(
        owner="w", now=T0 + 60, lease_timeout=LEASE, limit=10, exclude=()
    )
    assert record.run_id == run_id
    assert record.status is WorkflowStatus.RUNNING
    assert record.suspend_count == 1
    assert record.lease_expires_at == T0 + 60 + LEASE
    await store.record_step(step(run_id, "c1", T0 + 61), token=taken.token)


async def test_claim_due_exclude_and_limit(store: Store) -> None:
    runs = []
    for i in range(5):
        result = await store.create_workflow(
            new(f"k{i}"), now=T0 + i, lease=None, replace_live=False
        )
        runs.append(result.record.run_id)
    now = T0 + 10

    assert await store.claim_due(owner="w", now=now, lease_timeout=LEASE, limit=0, exclude=()) == []
    first = await store.claim_due(
        owner="w", now=now, lease_timeout=LEASE, limit=2, exclude=[runs[0]]
    )
    assert [r.run_id for r, _ in first] == [runs[1], runs[2]]
    rest = await store.claim_due(
        owner="w", now=now, lease_timeout=LEASE, limit=10, exclude={runs[0], "unknown"}
    )
    assert [r.run_id for r, _ in rest] == [runs[3], runs[4]]
    last = await store.claim_due(owner="w", now=now, lease_timeout=LEASE, limit=10, exclude=())
    assert [r.run_id for r, _ in last] == [runs[0]]
    excluded = await store.get_run(runs[0])
    assert excluded is not None and excluded.status is WorkflowStatus.RUNNING


async def test_claim_due_ignores_ended_and_superseded(store: Store) -> None:
    held = await running(store, "done")
    await store.finish_workflow(
        (await run_of(store, "done")).run_id,
        token=held.token,
        status=WorkflowStatus.COMPLETED,
        result=None,
        error=None,
        now=T0,
    )
    cancelled = await store.create_workflow(
        new("cancelled"), now=T0, lease=None, replace_live=False
    )
    assert await store.end_workflow(
        cancelled.record.run_id, status=WorkflowStatus.CANCELLED, error=None, now=T0
    )
    old = await store.create_workflow(new("replaced"), now=T0, lease=None, replace_live=False)
    new_ = await store.create_workflow(new("replaced"), now=T0, lease=None, replace_live=True)
    assert new_.replaced_run_id == old.record.run_id

    claimed = await store.claim_due(
        owner="w", now=T0 + 1000, lease_timeout=LEASE, limit=10, exclude=()
    )
    assert [r.run_id for r, _ in claimed] == [new_.record.run_id]


async def test_concurrent_claimers_get_disjoint_work(store: Store, other: Store) -> None:
    for i in range(40):
        await store.create_workflow(new(f"k{i}"), now=T0 + i, lease=None, replace_live=False)
    now = T0 + 100

    batches = await asyncio.gather(
        *(
            (store if i % 2 else other).claim_due(
                owner=f"worker-{i}", now=now, lease_timeout=LEASE, limit=10, exclude=()
            )
            for i in range(6)
        )
    )

    claimed = [(record.run_id, held) for batch in batches for record, held in batch]
    run_ids = [run_id for run_id, _ in claimed]
    assert len(run_ids) == len(set(run_ids)) == 40
    for run_id, held in claimed:
        record = await store.get_run(run_id)
        assert record is not None and record.lease_owner == held.owner
    assert all(len(batch) <= 10 for batch in batches)
    assert await store.renew_leases([h.token for _, h in claimed], expires_at=now + 60) == {
        h.token for _, h in claimed
    }


# ---------------------------------------------------------------------------- leases


async def test_renew_leases_returns_only_owned_tokens(store: Store, other: Store) -> None:
    owned1 = await running(store, "k1")
    owned2 = await running(store, "k2")
    finished = await running(store, "k3")
    await store.finish_workflow(
        (await run_of(store, "k3")).run_id,
        token=finished.token,
        status=WorkflowStatus.COMPLETED,
        result=None,
        error=None,
        now=T0 + 1,
    )
    cancelled = await running(store, "k4")
    await store.end_workflow(
        (await run_of(store, "k4")).run_id, status=WorkflowStatus.CANCELLED, error=None, now=T0 + 1
    )
    taken = await running(store, "k5", now=T0 - LEASE)  # already expired at T0
    [(_, new_owner)] = await other.claim_due(
        owner="worker-b", now=T0, lease_timeout=LEASE, limit=10, exclude=()
    )
    suspended = await running(store, "k6")
    await store.suspend_workflow(
        (await run_of(store, "k6")).run_id,
        token=suspended.token,
        error='"e"',
        now=T0 + 1,
        next_run_at=T0 + 500,
    )

    kept = await store.renew_leases(
        [
            owned1.token,
            owned2.token,
            finished.token,
            cancelled.token,
            taken.token,
            suspended.token,
            "unknown",
        ],
        expires_at=T0 + 100,
    )

    assert kept == {owned1.token, owned2.token}
    assert (await run_of(store, "k1")).lease_expires_at == T0 + 100
    assert (await run_of(store, "k2")).lease_expires_at == T0 + 100
    assert (await run_of(store, "k5")).lease_expires_at == new_owner.expires_at
    assert (await run_of(store, "k6")).lease_expires_at is None
    assert await store.renew_leases([], expires_at=T0 + 100) == set()
    # A renewed lease is not taken over when the old expiry passes (k5's lease, not renewed
    # by its new owner, is).
    claimed = await other.claim_due(
        owner="worker-b", now=T0 + 99, lease_timeout=LEASE, limit=10, exclude=()
    )
    assert [r.key for r, _ in claimed] == ["k5"]


async def test_expired_but_unclaimed_lease_is_still_owned(store: Store) -> None:
    held = await running(store, "k1")  # expires at T0 + LEASE
    assert await store.renew_leases([held.token], expires_at=T0 + 200) == {held.token}
    await store.record_step(
        step((await run_of(store, "k1")).run_id, "c1", T0 + 100), token=held.token
    )


async def test_release(store: Store, other: Store) -> None:
    held = await running(store, "k1")
    before = await run_of(store, "k1")

    await store.release_workflow(before.run_id, token="not-the-token", now=T0 + 5)
    assert await run_of(store, "k1") == before

    await store.release_workflow(before.run_id, token=held.token, now=T0 + 5)
    record = await run_of(store, "k1")
    assert record.status is WorkflowStatus.RUNNING
    assert record.lease_owner is None and record.lease_expires_at is None
    assert record.next_run_at == T0 + 5
    assert record.updated_at == T0 + 5
    with pytest.raises(errors.LeaseLost):
        await store.record_step(step(before.run_id, "c1", T0 + 5), token=held.token)
    assert await store.renew_leases([held.token], expires_at=T0 + 100) == set()

    # Due at once for another worker, long before the old lease would have expired.
    [(taken, _)] = await other.claim_due(
        owner="worker-b", now=T0 + 5, lease_timeout=LEASE, limit=10, exclude=()
    )
    assert taken.run_id == before.run_id
    assert taken.lease_owner == "worker-b"


# ---------------------------------------------------------------------------- requests


@pytest.mark.parametrize("status", [WorkflowStatus.CANCELLED, WorkflowStatus.TERMINATED])
async def test_end_workflow_live_executions(store: Store, status: WorkflowStatus) -> None:
    pending = await store.create_workflow(new("pending"), now=T0, lease=None, replace_live=False)
    held = await running(store, "running")
    susp_lease = await running(store, "suspended")
    suspended_id = (await run_of(store, "suspended")).run_id
    await store.suspend_workflow(
        suspended_id, token=susp_lease.token, error='"e"', now=T0, next_run_at=T0 + 60
    )
    running_id = (await run_of(store, "running")).run_id

    for run_id in (pending.record.run_id, running_id, suspended_id):
        assert await store.end_workflow(run_id, status=status, error='"by operator"', now=T0 + 9)
        record = await store.get_run(run_id)
        assert record is not None
        assert record.status is status
        assert record.ended_at == T0 + 9
        assert record.updated_at == T0 + 9
        assert record.error == '"by operator"'
        assert record.lease_owner is None and record.lease_expires_at is None
        assert record.next_run_at is None

    with pytest.raises(errors.LeaseLost):
        await store.record_step(step(running_id, "c1", T0 + 10), token=held.token)
    assert await store.count_by_status() == {status: 3}
    assert (
        await store.claim_due(owner="w", now=T0 + 1000, lease_timeout=LEASE, limit=10, exclude=())
        == []
    )


async def test_end_workflow_already_ended(store: Store) -> None:
    held = await running(store, "k1")
    run_id = (await run_of(store, "k1")).run_id
    await store.finish_workflow(
        run_id, token=held.token, status=WorkflowStatus.COMPLETED, result='"r"', error=None, now=T0
    )
    done = await run_of(store, "k1")

    assert not await store.end_workflow(
        run_id, status=WorkflowStatus.CANCELLED, error=None, now=T0 + 1
    )
    assert await run_of(store, "k1") == done
    assert not await store.end_workflow(
        "no-such-run", status=WorkflowStatus.CANCELLED, error=None, now=T0 + 1
    )
    cancelled = await store.create_workflow(new("k2"), now=T0, lease=None, replace_live=False)
    assert await store.end_workflow(
        cancelled.record.run_id, status=WorkflowStatus.CANCELLED, error=None, now=T0 + 1
    )
    assert not await store.end_workflow(
        cancelled.record.run_id, status=WorkflowStatus.TERMINATED, error='"x"', now=T0 + 2
    )
    record = await run_of(store, "k2")
    assert record.status is WorkflowStatus.CANCELLED
    assert record.ended_at == T0 + 1
    assert record.error is None


async def test_retry_now(store: Store) -> None:
    held = await running(store, "k1")
    run_id = (await run_of(store, "k1")).run_id
    assert not await store.retry_now(run_id, now=T0 + 1)  # RUNNING: not suspended
    await store.suspend_workflow(
        run_id, token=held.token, error='"e"', now=T0 + 1, next_run_at=T0 + 3600
    )
    assert (
        await store.claim_due(owner="w", now=T0 + 10, lease_timeout=LEASE, limit=10, exclude=())
        == []
    )

    assert await store.retry_now(run_id, now=T0 + 10)

    record = await run_of(store, "k1")
    assert record.status is WorkflowStatus.SUSPENDED
    assert record.next_run_at == T0 + 10
    assert record.updated_at == T0 + 10
    [(claimed, _)] = await store.claim_due(
        owner="w", now=T0 + 10, lease_timeout=LEASE, limit=10, exclude=()
    )
    assert claimed.run_id == run_id
    assert not await store.retry_now(run_id, now=T0 + 11)  # RUNNING again
    assert not await store.retry_now("no-such-run", now=T0 + 11)
    pending = await store.create_workflow(new("k2"), now=T0 + 50, lease=None, replace_live=False)
    assert not await store.retry_now(pending.record.run_id, now=T0 + 11)
    assert (await run_of(store, "k2")).next_run_at == T0 + 50


async def test_next_due(store: Store) -> None:
    assert await store.next_due(owner="a") is None

    await store.create_workflow(new("pending"), now=T0 + 5, lease=None, replace_live=False)
    assert await store.next_due(owner="a") == T0 + 5

    await running(store, "running", now=T0 - 27, owner="a")  # lease expires at T0 + 3
    assert await store.next_due(owner="b") == T0 + 3
    assert await store.next_due(owner="a") == T0 + 5  # its own leases are not waited for

    held = await running(store, "suspended", now=T0, owner="a")
    suspended_id = (await run_of(store, "suspended")).run_id
    await store.suspend_workflow(
        suspended_id, token=held.token, error='"e"', now=T0, next_run_at=T0 + 1
    )
    assert await store.next_due(owner="a") == T0 + 1
    assert await store.next_due(owner="b") == T0 + 1

    await store.end_workflow(suspended_id, status=WorkflowStatus.CANCELLED, error=None, now=T0)
    assert await store.next_due(owner="b") == T0 + 3
    await store.end_workflow(
        (await run_of(store, "pending")).run_id,
        status=WorkflowStatus.CANCELLED,
        error=None,
        now=T0,
    )
    assert await store.next_due(owner="a") is None


# ---------------------------------------------------------------------------- signals & waits


def accept_all(payload: str) -> str | None:
    return None


async def receive(
    store: Store,
    run_id: str,
    token: str,
    *,
    name: str = "approve",
    call_id: str = "c1",
    wait: bool = False,
    deadline: float | None = None,
    now: float = T0 + 3,
    accept: Any = accept_all,
) -> str | None:
    result: str | None = await store.receive_signal(
        run_id,
        token=token,
        name=name,
        call_id=call_id,
        started_at=T0 + 2,
        deadline=deadline,
        wait=wait,
        accept=accept,
        now=now,
    )
    return result


def waiting_for(db_url: str, run_id: str) -> str | None:
    (value,) = raw_sql(db_url, f"SELECT waiting_for FROM workflows WHERE run_id = '{run_id}'")[0]
    return None if value is None else str(value)


async def test_send_signal_to_unknown_or_ended(store: Store) -> None:
    assert await store.send_signal("nope", name="approve", payload="1", dedupe_id=None, now=T0) == (
        None,
        False,
    )
    held = await running(store, "k1")
    run_id = (await run_of(store, "k1")).run_id
    await store.finish_workflow(
        run_id, token=held.token, status=WorkflowStatus.COMPLETED, result=None, error=None, now=T0
    )
    done = await run_of(store, "k1")

    assert await store.send_signal(
        "k1", name="approve", payload="1", dedupe_id=None, now=T0 + 1
    ) == (done, False)
    assert await store.list_signals(run_id) == []


async def test_send_and_receive_signal(store: Store) -> None:
    held = await running(store, "k1")
    record = await run_of(store, "k1")

    sent = await store.send_signal(
        "k1", name="approve", payload='"yes"', dedupe_id=None, now=T0 + 1
    )

    assert sent == (record, True)
    [signal] = await store.list_signals(record.run_id)
    assert signal == SignalRecord(
        id=signal.id,
        name="approve",
        payload='"yes"',
        dedupe_id=None,
        created_at=T0 + 1,
        consumed_call=None,
        consumed_at=None,
        rejected=None,
    )
    assert await run_of(store, "k1") == record  # not waiting: nothing to wake

    assert await receive(store, record.run_id, held.token, call_id="c1", now=T0 + 3) == '"yes"'

    [signal] = await store.list_signals(record.run_id)
    assert (signal.consumed_call, signal.consumed_at, signal.rejected) == ("c1", T0 + 3, None)
    assert await store.load_steps(record.run_id) == [
        StepRecord(
            run_id=record.run_id,
            call_id="c1",
            kind=StepKind.SIGNAL,
            name="approve",
            status=StepStatus.COMPLETED,
            attempts=1,
            result='"yes"',
            error=None,
            started_at=T0 + 2,
            ended_at=T0 + 3,
        )
    ]
    # Delivered once: nothing more to receive, and no step for a receive that got nothing.
    assert await receive(store, record.run_id, held.token, call_id="c2") is None
    assert [s.call_id for s in await store.load_steps(record.run_id)] == ["c1"]
    assert (await run_of(store, "k1")).status is WorkflowStatus.RUNNING


async def test_signals_are_delivered_oldest_first_by_name(store: Store) -> None:
    held = await running(store, "k1")
    run_id = (await run_of(store, "k1")).run_id
    for i, (name, payload) in enumerate([("a", "a1"), ("b", "b1"), ("a", "a2")]):
        assert (
            await store.send_signal("k1", name=name, payload=payload, dedupe_id=None, now=T0 + i)
        )[1]

    got = [
        await receive(store, run_id, held.token, name=name, call_id=f"c{i}")
        for i, name in enumerate(["a", "a", "b", "a", "b"])
    ]

    assert got == ["a1", "a2", "b1", None, None]
    signals = await store.list_signals(run_id)
    assert [(s.name, s.payload, s.consumed_call) for s in signals] == [
        ("a", "a1", "c0"),
        ("b", "b1", "c2"),
        ("a", "a2", "c1"),
    ]
    assert signals[0].id < signals[1].id < signals[2].id


async def test_signal_dedupe(store: Store) -> None:
    await running(store, "k1")
    run_id = (await run_of(store, "k1")).run_id

    assert (await store.send_signal("k1", name="a", payload="1", dedupe_id="d1", now=T0))[1]
    assert not (await store.send_signal("k1", name="a", payload="2", dedupe_id="d1", now=T0))[1]
    assert (await store.send_signal("k1", name="b", payload="3", dedupe_id="d1", now=T0))[1]
    assert (await store.send_signal("k1", name="a", payload="4", dedupe_id=None, now=T0))[1]
    assert (await store.send_signal("k1", name="a", payload="4", dedupe_id=None, now=T0))[1]

    signals = await store.list_signals(run_id)
    assert [(s.name, s.payload, s.dedupe_id) for s in signals] == [
        ("a", "1", "d1"),
        ("b", "3", "d1"),
        ("a", "4", None),
        ("a", "4", None),
    ]


async def test_rejected_signals_are_kept_and_skipped(store: Store) -> None:
    held = await running(store, "k1")
    run_id = (await run_of(store, "k1")).run_id
    await store.send_signal("k1", name="approve", payload="not json", dedupe_id=None, now=T0)
    await store.send_signal("k1", name="approve", payload='"ok"', dedupe_id=None, now=T0 + 1)

    def only_json_strings(payload: str) -> str | None:
        return None if payload.startswith('"') else "expected a JSON string"

    got = await receive(store, run_id, held.token, accept=only_json_strings, now=T0 + 5)

    assert got == '"ok"'
    rejected, delivered = await store.list_signals(run_id)
    assert rejected.rejected == "expected a JSON string"
    assert rejected.consumed_at == T0 + 5
    assert rejected.consumed_call is None
    assert delivered.consumed_call == "c1" and delivered.rejected is None
    assert await receive(store, run_id, held.token, call_id="c2") is None


async def test_receive_signal_is_fenced(store: Store) -> None:
    await running(store, "k1")
    run_id = (await run_of(store, "k1")).run_id
    await store.send_signal("k1", name="approve", payload="1", dedupe_id=None, now=T0)
    before = await run_of(store, "k1")

    for wait in (False, True):
        with pytest.raises(errors.LeaseLost):
            await receive(store, run_id, "not-the-token", wait=wait, deadline=T0 + 9)

    [signal] = await store.list_signals(run_id)
    assert signal.consumed_at is None
    assert await store.load_steps(run_id) == []
    assert await run_of(store, "k1") == before


async def test_receive_waits_and_a_signal_wakes_it(store: Store, db_url: str) -> None:
    held = await running(store, "k1")
    run_id = (await run_of(store, "k1")).run_id

    got = await receive(store, run_id, held.token, wait=True, deadline=T0 + 100, now=T0 + 3)

    assert got is None
    record = await run_of(store, "k1")
    assert record.status is WorkflowStatus.WAITING
    assert record.next_run_at == T0 + 100
    assert record.updated_at == T0 + 3
    assert record.lease_owner is None and record.lease_expires_at is None
    assert waiting_for(db_url, run_id) == "signal:approve"
    assert await store.load_steps(run_id) == [
        step(
            run_id,
            "c1",
            T0 + 2,
            kind=StepKind.SIGNAL,
            name="approve",
            status=StepStatus.WAITING,
            result=None,
            ended_at=T0 + 100,
        )
    ]
    with pytest.raises(errors.LeaseLost):  # the lease was given up
        await store.record_step(step(run_id, "c9", T0 + 4), token=held.token)
    assert await store.renew_leases([held.token], expires_at=T0 + 500) == set()
    assert (
        await store.claim_due(owner="w", now=T0 + 50, lease_timeout=LEASE, limit=9, exclude=())
        == []
    )

    # A signal of another name does not wake it; this one does.
    await store.send_signal("k1", name="other", payload="0", dedupe_id=None, now=T0 + 40)
    assert (await run_of(store, "k1")).next_run_at == T0 + 100
    await store.send_signal("k1", name="approve", payload='"yes"', dedupe_id=None, now=T0 + 50)
    woken = await run_of(store, "k1")
    assert woken.status is WorkflowStatus.WAITING
    assert woken.next_run_at == T0 + 50
    assert woken.updated_at == T0 + 50
    assert await store.next_due(owner="w") == T0 + 50

    [(claimed, again)] = await store.claim_due(
        owner="w", now=T0 + 50, lease_timeout=LEASE, limit=9, exclude=()
    )
    assert claimed.run_id == run_id and claimed.status is WorkflowStatus.RUNNING
    assert waiting_for(db_url, run_id) is None
    assert await receive(store, run_id, again.token, now=T0 + 51) == '"yes"'
    [completed] = await store.load_steps(run_id)
    assert (completed.status, completed.result, completed.ended_at) == (
        StepStatus.COMPLETED,
        '"yes"',
        T0 + 51,
    )


async def test_receive_wait_deadline_makes_it_due(store: Store) -> None:
    held = await running(store, "k1")
    run_id = (await run_of(store, "k1")).run_id
    await receive(store, run_id, held.token, wait=True, deadline=T0 + 10)
    assert (
        await store.claim_due(owner="w", now=T0 + 9, lease_timeout=LEASE, limit=9, exclude=()) == []
    )
    [(claimed, _)] = await store.claim_due(
        owner="w", now=T0 + 10, lease_timeout=LEASE, limit=9, exclude=()
    )
    assert claimed.run_id == run_id


async def test_receive_wait_without_deadline_is_never_due_by_itself(store: Store) -> None:
    held = await running(store, "k1")
    run_id = (await run_of(store, "k1")).run_id
    await receive(store, run_id, held.token, wait=True, deadline=None)
    record = await run_of(store, "k1")
    assert record.status is WorkflowStatus.WAITING and record.next_run_at is None
    assert await store.next_due(owner="w") is None
    assert (
        await store.claim_due(owner="w", now=T0 + 1e6, lease_timeout=LEASE, limit=9, exclude=())
        == []
    )
    # ... until a signal comes.
    await store.send_signal("k1", name="approve", payload="1", dedupe_id=None, now=T0 + 7)
    assert await store.next_due(owner="w") == T0 + 7


async def test_wait_workflow_timer(store: Store, db_url: str) -> None:
    held = await running(store, "k1")
    run_id = (await run_of(store, "k1")).run_id
    sleep = step(
        run_id, "s1", T0 + 1, kind=StepKind.SLEEP, name="sleep", result=None, ended_at=T0 + 60
    )

    with pytest.raises(errors.LeaseLost):
        await store.wait_workflow(
            run_id,
            token="not-the-token",
            waiting_for="timer",
            next_run_at=T0 + 60,
            step=sleep,
            now=T0 + 1,
        )
    assert await store.load_steps(run_id) == []
    assert (await run_of(store, "k1")).status is WorkflowStatus.RUNNING

    await store.wait_workflow(
        run_id, token=held.token, waiting_for="timer", next_run_at=T0 + 60, step=sleep, now=T0 + 1
    )

    record = await run_of(store, "k1")
    assert record.status is WorkflowStatus.WAITING
    assert record.next_run_at == T0 + 60
    assert record.updated_at == T0 + 1
    assert record.lease_owner is None and record.lease_expires_at is None
    assert waiting_for(db_url, run_id) == "timer"
    assert await store.load_steps(run_id) == [sleep]
    with pytest.raises(errors.LeaseLost):
        await store.wait_workflow(
            run_id,
            token=held.token,
            waiting_for="timer",
            next_run_at=T0 + 90,
            step=None,
            now=T0 + 2,
        )
    assert await store.next_due(owner="w") == T0 + 60
    assert (
        await store.claim_due(owner="w", now=T0 + 59, lease_timeout=LEASE, limit=9, exclude=())
        == []
    )
    [(claimed, again)] = await store.claim_due(
        owner="w", now=T0 + 60, lease_timeout=LEASE, limit=9, exclude=()
    )
    assert claimed.run_id == run_id
    # Without a step, only the state changes.
    await store.wait_workflow(
        run_id, token=again.token, waiting_for="timer", next_run_at=T0 + 120, step=None, now=T0 + 61
    )
    assert (await run_of(store, "k1")).next_run_at == T0 + 120
    assert await store.load_steps(run_id) == [sleep]


async def test_wait_for_child(store: Store, other: Store, db_url: str) -> None:
    held = await running(store, "parent")
    parent_id = (await run_of(store, "parent")).run_id
    created = await store.create_workflow(
        new("child", parent_key="parent"), now=T0, lease=None, replace_live=False
    )
    child_id = created.record.run_id

    assert (
        await store.wait_for_child(
            parent_id, token=held.token, child_key="nope", wait=True, now=T0 + 1
        )
        is None
    )
    with pytest.raises(errors.LeaseLost):
        await store.wait_for_child(
            parent_id, token="not-the-token", child_key="child", wait=True, now=T0 + 1
        )
    seen = await store.wait_for_child(
        parent_id, token=held.token, child_key="child", wait=False, now=T0 + 1
    )
    assert seen == created.record
    assert (await run_of(store, "parent")).status is WorkflowStatus.RUNNING

    seen = await store.wait_for_child(
        parent_id, token=held.token, child_key="child", wait=True, now=T0 + 2
    )

    assert seen == created.record
    parent = await run_of(store, "parent")
    assert parent.status is WorkflowStatus.WAITING
    assert parent.next_run_at is None
    assert parent.updated_at == T0 + 2
    assert parent.lease_owner is None
    assert waiting_for(db_url, parent_id) == "child:child"
    with pytest.raises(errors.LeaseLost):
        await store.record_step(step(parent_id, "c1", T0 + 3), token=held.token)
    # Only the child is due; its end makes the parent due at once.
    [(child, child_lease)] = await other.claim_due(
        owner="w", now=T0 + 5, lease_timeout=LEASE, limit=9, exclude=()
    )
    assert child.run_id == child_id
    await other.finish_workflow(
        child_id,
        token=child_lease.token,
        status=WorkflowStatus.COMPLETED,
        result='"r"',
        error=None,
        now=T0 + 20,
    )
    parent = await run_of(store, "parent")
    assert parent.status is WorkflowStatus.WAITING and parent.next_run_at == T0 + 20
    [(claimed, again)] = await store.claim_due(
        owner="w", now=T0 + 20, lease_timeout=LEASE, limit=9, exclude=()
    )
    assert claimed.run_id == parent_id

    # An ended child: returned, and the parent does not wait.
    ended = await store.wait_for_child(
        parent_id, token=again.token, child_key="child", wait=True, now=T0 + 21
    )
    assert ended is not None and ended.status is WorkflowStatus.COMPLETED
    assert (await run_of(store, "parent")).status is WorkflowStatus.RUNNING


@pytest.mark.parametrize("status", [WorkflowStatus.CANCELLED, WorkflowStatus.FAILED])
async def test_child_end_wakes_only_its_waiting_parent(
    store: Store, status: WorkflowStatus
) -> None:
    parents = {name: await running(store, name) for name in ("parent", "bystander")}
    child_lease = lease()
    child = await store.create_workflow(
        new("child", parent_key="parent"), now=T0, lease=child_lease, replace_live=False
    )
    await store.create_workflow(
        new("sibling", parent_key="bystander"), now=T0, lease=None, replace_live=False
    )
    for name, held in parents.items():
        kid = "child" if name == "parent" else "sibling"
        run_id = (await run_of(store, name)).run_id
        await store.wait_for_child(run_id, token=held.token, child_key=kid, wait=True, now=T0 + 1)

    if status is WorkflowStatus.CANCELLED:
        assert await store.end_workflow(child.record.run_id, status=status, error=None, now=T0 + 30)
    else:
        await store.finish_workflow(
            child.record.run_id,
            token=child_lease.token,
            status=status,
            result=None,
            error='"e"',
            now=T0 + 30,
        )

    assert (await run_of(store, "parent")).next_run_at == T0 + 30
    assert (await run_of(store, "bystander")).next_run_at is None


async def test_signal_never_lost_while_the_receiver_starts_waiting(
    store: Store, other: Store
) -> None:
    # The receiver decides to wait while the signal is being sent: either it receives the
    # signal, or it waits and the signal has made it due. Never waiting with a signal pending.
    for i in range(30):
        held = await running(store, f"k{i}")
        run_id = (await run_of(store, f"k{i}")).run_id
        got, (_, stored) = await asyncio.gather(
            receive(store, run_id, held.token, wait=True, deadline=None, now=T0 + 5),
            other.send_signal(f"k{i}", name="approve", payload="p", dedupe_id=None, now=T0 + 6),
        )
        assert stored
        record = await run_of(store, f"k{i}")
        if got is None:
            assert record.status is WorkflowStatus.WAITING
            assert record.next_run_at == T0 + 6, f"round {i}: lost wake-up"
        else:
            assert got == "p" and record.status is WorkflowStatus.RUNNING


async def test_child_end_never_lost_while_the_parent_starts_waiting(
    store: Store, other: Store
) -> None:
    for i in range(30):
        held = await running(store, f"p{i}")
        parent_id = (await run_of(store, f"p{i}")).run_id
        child_lease = lease("worker-b")
        created = await store.create_workflow(
            new(f"c{i}", parent_key=f"p{i}"), now=T0, lease=child_lease, replace_live=False
        )
        seen, _ = await asyncio.gather(
            store.wait_for_child(
                parent_id, token=held.token, child_key=f"c{i}", wait=True, now=T0 + 5
            ),
            other.finish_workflow(
                created.record.run_id,
                token=child_lease.token,
                status=WorkflowStatus.COMPLETED,
                result=None,
                error=None,
                now=T0 + 6,
            ),
        )
        assert seen is not None
        parent = await run_of(store, f"p{i}")
        if seen.status.ended:
            assert parent.status is WorkflowStatus.RUNNING
        else:
            assert parent.status is WorkflowStatus.WAITING
            assert parent.next_run_at == T0 + 6, f"round {i}: lost wake-up"


# ---------------------------------------------------------------------------- lifecycle


async def test_verbs_need_an_open_store(db_url: str) -> None:
    s = open_store(db_url)
    with pytest.raises(errors.ManagerStateError):
        await s.get_workflow("k1")
    await s.open()
    await s.open()  # idempotent
    assert await s.get_workflow("k1") is None
    await s.close()
    await s.close()  # idempotent
    with pytest.raises(errors.ManagerStateError):
        await s.get_workflow("k1")


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
    assert [v for (v,) in versions] == list(range(1, latest + 1))


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


# ---------------------------------------------------------------------------- PostgreSQL only

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
    assert [t for (t,) in tables] == ["schema_migrations", "signals", "steps", "workflows"]
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
def transient_failure(store: Store, *, use: int, after_commit: bool = True) -> Iterator[None]:
    """Make the ``use``-th transaction (1-based) fail as if the connection dropped: after its
    COMMIT, before the acknowledgement (``after_commit``), or before it did anything."""
    import psycopg

    pool = store._pool  # type: ignore[attr-defined]
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
            raise psycopg.OperationalError("simulated: connection lost after COMMIT")

    pool.getconn, pool.putconn = getconn, putconn
    try:
        yield
    finally:
        del pool.getconn, pool.putconn
    assert uses[0] > use, "the transient failure was not retried"


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
