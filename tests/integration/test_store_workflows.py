"""The Store contract on every backend (``db_url``: SQLite and PostgreSQL), part 1: creating,
reading, claiming, leasing, ending and retrying workflows, and opening the store.

Times are explicit (``now``), as the engine passes them, so no test sleeps. The other parts:
``test_store_steps.py``, ``test_store_signals_and_waits.py``, ``test_store_postgres_only.py``,
and ``tests/migration``; helpers in ``tests/store_helpers.py``, fixtures in ``conftest.py``.
"""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

from sagaway import errors
from sagaway.states import WorkflowStatus
from sagaway.store import Store, open_store
from sagaway.store.records import WorkflowRecord
from tests.store_helpers import LEASE, T0, lease, new, run_of, running, step

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


async def test_create_keeps_the_trace_context_for_every_reader(store: Store) -> None:
    carrier = '{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}'
    wf = dataclasses.replace(new("k1"), trace_context=carrier)
    result = await store.create_workflow(wf, now=T0, lease=None, replace_live=False)
    assert result.record.trace_context == carrier
    assert (await store.get_workflow("k1")).trace_context == carrier  # type: ignore[union-attr]
    [(claimed, _)] = await store.claim_due(
        owner="w", now=T0, lease_timeout=LEASE, limit=10, exclude=()
    )
    assert claimed.trace_context == carrier
    plain = await store.create_workflow(new("k2"), now=T0, lease=None, replace_live=False)
    assert plain.record.trace_context is None


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


# ---------------------------------------------------------------------------- claim_due


async def test_claim_due_takes_pending_in_arrival_order(store: Store) -> None:
    """PENDING starts of one priority and fairness key are taken first in, first out: in the
    order they were created, whatever time each was given (their fair passes follow each
    other; started work goes by due time)."""
    created = [
        (await store.create_workflow(new(f"k{i}"), now=T0 + i, lease=None, replace_live=False))
        for i in (2, 0, 1)
    ]
    by_key = {c.record.key: c.record for c in created}
    now = T0 + 10

    claimed = await store.claim_due(
        owner="worker-a", now=now, lease_timeout=LEASE, limit=10, exclude=()
    )

    assert [r.key for r, _ in claimed] == ["k2", "k0", "k1"]
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
        assert record.previous_owner is None
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
    assert record.previous_owner == "worker-a"  # a takeover: the metrics count it
    assert await store.renew_leases([held.token, taken.token], expires_at=T0 + 99) == {taken.token}


async def test_a_renewal_never_shortens_a_lease(store: Store) -> None:
    """A heartbeat's renewal delayed on its way can land after the run's own, later one."""
    held = await running(store, "k1")
    assert await store.renew_leases([held.token], expires_at=T0 + 500) == {held.token}
    assert await store.renew_leases([held.token], expires_at=T0 + 200) == {held.token}
    assert (await run_of(store, "k1")).lease_expires_at == T0 + 500
    assert await store.renew_leases([held.token], expires_at=T0 + 700) == {held.token}
    assert (await run_of(store, "k1")).lease_expires_at == T0 + 700


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
    assert record.previous_owner is None  # nobody held it: not a takeover
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
