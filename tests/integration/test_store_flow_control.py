"""The Store contract of per-key order and debounced starts on every backend (``db_url``:
SQLite, PostgreSQL and the Engine Server in front of either).

Per-key order: PENDING executions with an ``ordering_key`` are claimed one at a time, the
earliest started first, and the next only once the one before it has ended (WAITING and
SUSPENDED hold the line); a head whose lease expired is taken over before anything behind it.

Debounce: a start with a ``debounce_key`` folds into the PENDING execution of its workflow and
key (its arguments, its start postponed, never past the burst's maximum wait) instead of
creating another; its own idempotency key finds that execution again; once claimed, the next
start makes a new one; concurrent starts from two stores make one.

Times are explicit (``now``), as the engine passes them, so no test sleeps.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json

from sagaway import serialization
from sagaway.states import WorkflowStatus
from sagaway.store import Store
from sagaway.store.contract import CreateResult
from sagaway.store.records import Lease, NewWorkflow, WorkflowRecord
from tests.store_helpers import LEASE, T0, new


async def _ordered(store: Store, key: str, okey: str, now: float = T0) -> WorkflowRecord:
    item = dataclasses.replace(new(key), ordering_key=okey)
    result = await store.create_workflow(item, now=now, lease=None, replace_live=False)
    assert result.created and result.record.status is WorkflowStatus.PENDING
    assert result.record.ordering_key == okey and result.record.ordering_seq is not None
    return result.record


async def _claim(
    store: Store, now: float = T0 + 1, limit: int = 50
) -> list[tuple[WorkflowRecord, Lease]]:
    return await store.claim_due(
        owner="w", now=now, lease_timeout=LEASE, limit=limit, exclude=(), queues=None
    )


async def _finish(store: Store, run_id: str, held: Lease, now: float) -> None:
    await store.finish_workflow(
        run_id,
        token=held.token,
        status=WorkflowStatus.COMPLETED,
        result="1",
        error=None,
        now=now,
        has_parent=False,
    )


async def test_a_line_runs_one_at_a_time_in_the_order_started(store: Store) -> None:
    for i in range(5):
        await _ordered(store, f"a{i}", "account-42", now=T0 + i * 0.001)
    await _ordered(store, "b0", "account-7")
    now, order = T0 + 1, []
    for _ in range(5):
        claimed = await _claim(store, now)
        keyed = [(r, held) for r, held in claimed if r.ordering_key == "account-42"]
        assert len(keyed) == 1  # one at a time
        record, held = keyed[0]
        order.append(record.key)
        assert await _claim(store, now + 0.5) == []  # nothing behind it while it runs
        await _finish(store, record.run_id, held, now + 0.6)
        now += 1
    assert order == [f"a{i}" for i in range(5)]


async def test_waiting_and_suspended_heads_hold_the_line(store: Store) -> None:
    await _ordered(store, "a0", "k")
    await _ordered(store, "a1", "k")
    [(first, held)] = await _claim(store)
    await store.wait_workflow(
        first.run_id,
        token=held.token,
        waiting_for="timer",
        next_run_at=T0 + 100,
        step=None,
        now=T0 + 1,
    )
    assert await _claim(store, T0 + 2) == []
    assert await store.next_due(owner="w2") == T0 + 100  # the one behind is not due
    [(again, held)] = await _claim(store, T0 + 100)
    assert again.run_id == first.run_id
    await store.suspend_workflow(
        again.run_id, token=held.token, error="{}", now=T0 + 101, next_run_at=T0 + 10_000
    )
    assert await _claim(store, T0 + 102) == []
    [(third, held)] = await _claim(store, T0 + 10_000)
    assert third.run_id == first.run_id
    await _finish(store, third.run_id, held, T0 + 10_001)
    [(second, _)] = await _claim(store, T0 + 10_002)
    assert second.key == "a1"


async def test_a_crashed_head_is_taken_over_before_the_line_moves(store: Store) -> None:
    await _ordered(store, "a0", "k")
    await _ordered(store, "a1", "k")
    [(first, _)] = await _claim(store)
    # Its worker dies: nothing behind it until the lease expires, and then the head again.
    assert await _claim(store, T0 + LEASE) == []
    [(again, held)] = await _claim(store, T0 + 1 + LEASE)
    assert again.run_id == first.run_id and again.previous_owner == "w"
    await _finish(store, again.run_id, held, T0 + 2 + LEASE)
    [(second, _)] = await _claim(store, T0 + 3 + LEASE)
    assert second.key == "a1"


async def test_concurrent_starts_and_claims_of_one_line(store: Store, other: Store) -> None:
    await asyncio.gather(
        *(_ordered(s, f"{s is store}-{i}", "k") for i in range(6) for s in (store, other))
    )
    seqs = [r.ordering_seq for r in await store.list_workflows(status=None, limit=50)]
    assert len(set(seqs)) == 12  # every start its own place
    results = await asyncio.gather(*(_claim(s) for s in [store, other] * 3))
    assert sum(len(r) for r in results) == 1


def _debounced(
    key: str, value: int, *, wait: float = 5.0, most: float | None = None
) -> NewWorkflow:
    args = json.dumps({"value": value})
    return dataclasses.replace(
        new(key),
        args=args,
        args_hash=serialization.args_hash(args),
        debounce_key="user-1",
        debounce=wait,
        debounce_max_wait=most,
    )


async def _start(store: Store, item: NewWorkflow, now: float) -> CreateResult:
    return await store.create_workflow(item, now=now, lease=None, replace_live=False)


async def test_a_burst_of_starts_makes_one_run_with_the_last_arguments(store: Store) -> None:
    first = await _start(store, _debounced("s0", 0), T0)
    assert first.created and first.record.next_run_at == T0 + 5
    assert first.record.debounce_key == "user-1"
    for i in range(1, 100):
        result = await _start(store, _debounced(f"s{i}", i), T0 + i)
        assert not result.created and result.record.run_id == first.record.run_id
        assert result.record.next_run_at == T0 + i + 5
    run = await store.get_run(first.record.run_id)
    assert run is not None and json.loads(run.args) == {"value": 99}
    assert await store.get_workflow("s50") is None  # the run's key is the first start's
    assert await _claim(store, T0 + 103) == []  # postponed by the last start
    [(claimed, _)] = await _claim(store, T0 + 104)
    assert claimed.run_id == first.record.run_id and json.loads(claimed.args) == {"value": 99}
    # A start retried with the key of a folded start finds the run, started or not.
    again = await _start(store, _debounced("s50", 1000), T0 + 105)
    assert not again.created and again.record.run_id == first.record.run_id
    # Once started, a new start begins a new burst.
    later = await _start(store, _debounced("t0", 7), T0 + 106)
    assert later.created and later.record.run_id != first.record.run_id


async def test_the_maximum_wait_bounds_a_burst(store: Store) -> None:
    first = await _start(store, _debounced("s0", 0, most=12), T0)
    for i in range(1, 20):
        result = await _start(store, _debounced(f"s{i}", i, most=12), T0 + i)
        assert result.record.next_run_at == min(T0 + i + 5, T0 + 12)
    [(claimed, _)] = await _claim(store, T0 + 12)
    assert claimed.run_id == first.record.run_id and json.loads(claimed.args) == {"value": 19}


async def test_concurrent_debounced_starts_make_one_run(store: Store, other: Store) -> None:
    results = await asyncio.gather(
        *(
            _start(s, _debounced(f"{s is store}-{i}", i), T0)
            for i in range(10)
            for s in (store, other)
        )
    )
    assert sum(r.created for r in results) == 1
    assert len({r.record.run_id for r in results}) == 1
    assert len(await store.list_workflows(status=WorkflowStatus.PENDING, limit=50)) == 1


async def test_a_purge_takes_the_starts_folded_into_the_run(store: Store) -> None:
    first = await _start(store, _debounced("s0", 0), T0)
    await _start(store, _debounced("s1", 1), T0 + 1)
    [(claimed, held)] = await _claim(store, T0 + 6)
    await _finish(store, claimed.run_id, held, T0 + 7)
    assert await store.purge_ended(before=T0 + 10, statuses=None, limit=10) == [first.record.run_id]
    # The run is gone, and so is what the folded start joined: it starts anew.
    again = await _start(store, _debounced("s1", 2), T0 + 11)
    assert again.created and again.record.run_id != first.record.run_id
