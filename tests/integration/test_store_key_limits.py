"""The Store contract of per-key workflow limits on every backend (``db_url``: SQLite,
PostgreSQL and the Engine Server in front of either): a PENDING execution with a
``concurrency_key`` is claimed only while fewer than its limit of the key's executions run
(RUNNING, WAITING, SUSPENDED), also when several are due in one claim or two stores claim at
once; an end makes room; ``next_due`` leaves blocked executions out; the key is read back.

Times are explicit (``now``), as the engine passes them, so no test sleeps.
"""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

from sagaway.states import WorkflowStatus
from sagaway.store import Store
from sagaway.store.records import Lease, WorkflowRecord
from tests.store_helpers import LEASE, T0, lease, new


async def _create(store: Store, key: str, ckey: str | None, limit: int = 1) -> None:
    item = dataclasses.replace(new(key), concurrency_key=ckey, max_per_key=limit)
    result = await store.create_workflow(item, now=T0, lease=None, replace_live=False)
    assert result.created
    assert result.record.status is WorkflowStatus.PENDING
    assert result.record.concurrency_key == ckey


async def _claim(store: Store, now: float = T0 + 1) -> list[tuple[WorkflowRecord, Lease]]:
    return await store.claim_due(
        owner="w", now=now, lease_timeout=LEASE, limit=50, exclude=(), queues=None
    )


async def test_one_claim_starts_no_more_than_the_limit(store: Store) -> None:
    for i in range(3):
        await _create(store, f"a{i}", "customer-a")
    for i in range(3):
        await _create(store, f"b{i}", "customer-b", limit=2)
    await _create(store, "free", None)
    claimed = await _claim(store)
    keys = sorted(r.key for r, _ in claimed)
    assert len([k for k in keys if k.startswith("a")]) == 1
    assert len([k for k in keys if k.startswith("b")]) == 2
    assert "free" in keys
    assert await _claim(store, T0 + 2) == []
    # The blocked ones are not due (at T0): only the claimed ones' leases can expire.
    assert await store.next_due(owner="w2") == T0 + 1 + LEASE


async def test_an_end_makes_room_and_waiting_counts_as_running(store: Store) -> None:
    await _create(store, "a0", "k")
    await _create(store, "a1", "k")
    [(first, held)] = await _claim(store)
    # WAITING (a timer, a signal) still runs: the next one stays PENDING.
    await store.wait_workflow(
        first.run_id,
        token=held.token,
        waiting_for="timer",
        next_run_at=T0 + 100,
        step=None,
        now=T0 + 1,
    )
    assert await _claim(store, T0 + 2) == []
    [(again, held)] = await _claim(store, T0 + 100)
    assert again.run_id == first.run_id
    await store.finish_workflow(
        again.run_id,
        token=held.token,
        status=WorkflowStatus.COMPLETED,
        result="1",
        error=None,
        now=T0 + 101,
        has_parent=False,
    )
    assert await store.next_due(owner="w2") == T0
    [(second, _)] = await _claim(store, T0 + 102)
    assert second.run_id != first.run_id and second.concurrency_key == "k"


async def test_concurrent_claims_share_the_limit(store: Store, other: Store) -> None:
    for i in range(10):
        await _create(store, f"a{i}", "k", limit=2)
    results = await asyncio.gather(*(_claim(s) for s in [store, other] * 4))
    assert sum(len(r) for r in results) == 2
    running = [r for r in await store.list_workflows(status=WorkflowStatus.RUNNING, limit=50)]
    assert len(running) == 2
    assert all(
        r.lease_owner is None
        for r in await store.list_workflows(status=WorkflowStatus.PENDING, limit=50)
    )


async def test_a_keyed_execution_is_never_created_with_a_lease(store: Store) -> None:
    item = dataclasses.replace(new("a"), concurrency_key="k")
    with pytest.raises(ValueError, match="PENDING"):
        await store.create_workflow(item, now=T0, lease=lease(), replace_live=False)
    assert await store.get_workflow("a") is None
