"""The Store contract of priority and fairness on every backend (``db_url``: SQLite,
PostgreSQL and the Engine Server in front of either): claims take due work by priority (higher
first), PENDING starts of one level first in, first out by their fair pass, the due work of
started executions before any start; starts of several fairness keys are claimed
in proportion to their weights; the options are read back.

Times are explicit (``now``), as the engine passes them, so no test sleeps.
"""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

from sagaway.states import WorkflowStatus
from sagaway.store import Store
from sagaway.store.records import Lease, QueueAdmission, WorkflowRecord
from tests.store_helpers import LEASE, T0, new


async def _start(
    store: Store, key: str, priority: int = 3, tenant: str = "", weight: float = 1.0
) -> WorkflowRecord:
    item = dataclasses.replace(
        new(key), priority=priority, fairness_key=tenant, fairness_weight=weight
    )
    result = await store.create_workflow(item, now=T0, lease=None, replace_live=False)
    assert result.created and result.record.status is WorkflowStatus.PENDING
    return result.record


async def _claim(
    store: Store, limit: int = 1, now: float = T0 + 1
) -> list[tuple[WorkflowRecord, Lease]]:
    return await store.claim_due(
        owner="w", now=now, lease_timeout=LEASE, limit=limit, exclude=(), queues=None
    )


async def _claim_keys(store: Store, count: int, limit: int = 1) -> list[str]:
    keys: list[str] = []
    while len(keys) < count:
        got = await _claim(store, limit=min(limit, count - len(keys)))
        assert got, f"nothing due after {keys}"
        keys.extend(record.key for record, _ in got)
    return keys


async def test_higher_priority_first_and_first_in_first_out_within_a_level(
    store: Store,
) -> None:
    levels = [3, 1, 5, 3, 2, 5, 1, 4, 3, 5, 2, 4]
    for i, level in enumerate(levels):
        await _start(store, f"s{i:02d}-p{level}", priority=level)
    expected = [
        f"s{i:02d}-p{level}"
        for level, i in sorted(
            ((lv, i) for i, lv in enumerate(levels)), key=lambda t: (-t[0], t[1])
        )
    ]
    assert await _claim_keys(store, len(levels)) == expected


async def test_one_claim_of_many_takes_them_in_order(store: Store) -> None:
    for i, level in enumerate([1, 2, 3, 4, 5, 1, 2, 3, 4, 5]):
        await _start(store, f"s{i}-p{level}", priority=level)
    got = await _claim(store, limit=4)
    assert [r.key for r, _ in got] == ["s4-p5", "s9-p5", "s3-p4", "s8-p4"]


async def test_started_work_keeps_its_place_before_new_starts(store: Store) -> None:
    """A due timer of a started execution (of the lowest level) is claimed before the PENDING
    starts, whatever their level: work in progress is not starved by new work."""
    await _start(store, "sleeper", priority=1)
    [(sleeper, held)] = await _claim(store)
    await store.wait_workflow(
        sleeper.run_id,
        token=held.token,
        waiting_for="timer",
        next_run_at=T0 + 5,
        step=None,
        now=T0 + 1,
    )
    for i in range(3):
        await _start(store, f"start{i}", priority=3)
    await _start(store, "urgent", priority=5)
    got = await store.claim_due(
        owner="w", now=T0 + 6, lease_timeout=LEASE, limit=3, exclude=(), queues=None
    )
    assert [r.key for r, _ in got] == ["sleeper", "urgent", "start0"]


async def test_the_options_are_read_back(store: Store) -> None:
    record = await _start(store, "a", priority=5, tenant="acme", weight=2.5)
    assert (record.priority, record.fairness_key, record.fairness_weight) == (5, "acme", 2.5)
    assert record.fair_pass is not None
    again = await store.get_workflow("a")
    assert again is not None
    assert (again.priority, again.fairness_key, again.fairness_weight) == (5, "acme", 2.5)
    assert again.fair_pass == record.fair_pass
    plain = await _start(store, "b")
    assert (plain.priority, plain.fairness_key, plain.fairness_weight) == (3, "", 1.0)


async def test_a_small_tenant_is_not_held_back_by_a_large_one(store: Store) -> None:
    """Tenant "big" queues 120 starts before "small" queues 6: small's are claimed within the
    first 12 claims (one in two while both wait), big's in their own order."""
    for i in range(120):
        await _start(store, f"big-{i:03d}", tenant="big")
    for i in range(6):
        await _start(store, f"small-{i}", tenant="small")
    order = await _claim_keys(store, 126, limit=4)
    small = [n for n, key in enumerate(order) if key.startswith("small")]
    assert max(small) < 13, order[:20]
    assert [k for k in order if k.startswith("big")] == [f"big-{i:03d}" for i in range(120)]
    assert [k for k in order if k.startswith("small")] == [f"small-{i}" for i in range(6)]


async def test_weights_share_the_claims(store: Store) -> None:
    """Weight 3 against weight 1: of the first 40 claims, 30 (within one) are the heavy
    key's."""
    for i in range(60):
        await _start(store, f"heavy-{i:02d}", tenant="heavy", weight=3)
        await _start(store, f"light-{i:02d}", tenant="light", weight=1)
    order = await _claim_keys(store, 40, limit=5)
    heavy = sum(1 for key in order if key.startswith("heavy"))
    assert 29 <= heavy <= 31, order


async def test_a_late_tenant_starts_at_the_virtual_time_not_at_zero(store: Store) -> None:
    """A key that comes while others have waited long is not owed their whole past: after 50
    of 100 claims of tenant a, tenant b's new starts alternate with a's remaining ones (b's
    passes start at the oldest waiting start's, so all ten are among the next 21 claims: equal
    passes are taken in either order)."""
    for i in range(100):
        await _start(store, f"a-{i:03d}", tenant="a")
    await _claim_keys(store, 50, limit=10)
    for i in range(10):
        await _start(store, f"b-{i}", tenant="b")
    order = await _claim_keys(store, 21, limit=5)
    assert sum(1 for key in order if key.startswith("b")) == 10
    assert 4 <= sum(1 for key in order[:10] if key.startswith("b")) <= 5


async def test_starts_made_at_once_get_passes_of_their_own(store: Store) -> None:
    """Concurrent starts (grouped into one insert on PostgreSQL) still get one pass each per
    key and level, so tenants alternate."""
    items = [dataclasses.replace(new(f"c{i:02d}"), fairness_key="ab"[i % 2]) for i in range(20)]
    results = await asyncio.gather(
        *(store.create_workflow(it, now=T0, lease=None, replace_live=False) for it in items)
    )
    for tenant in "ab":
        passes = [r.record.fair_pass for r in results if r.record.fairness_key == tenant]
        assert len(set(passes)) == 10, passes
    order = await _claim_keys(store, 20, limit=4)
    firsts = [key for key in order[:10]]
    assert 4 <= sum(1 for key in firsts if int(key[1:]) % 2) <= 6, order


async def test_a_freed_queue_slot_wakes_the_highest_priority_waiter(store: Store) -> None:
    """Workflows WAITING for a slot of a full cluster-wide queue: when the slot is given back,
    the waiter of the highest priority is woken first, though another waited longer."""
    waiting = {}
    for key, level in (("low-old", 1), ("high", 5), ("low-new", 1)):
        await _start(store, key, priority=level)
        [(record, held)] = await _claim(store)
        await store.wait_workflow(
            record.run_id,
            token=held.token,
            waiting_for="queue:payments",
            next_run_at=T0 + 100,
            step=None,
            now=T0 + 1 + len(waiting),
        )
        waiting[key] = record.run_id
    admission = QueueAdmission(queue="payments", holder="h", concurrency=1, rate_per_second=None)
    assert await store.acquire_queue_slot(admission, expires_at=T0 + 60, now=T0 + 5) is None
    await store.release_queue_slot("payments", holder="h", now=T0 + 6)
    woken = [key for key in waiting if (await store.get_workflow(key)).next_run_at == T0 + 6]  # type: ignore[union-attr]
    assert woken == ["high"]


@pytest.mark.parametrize("bad", [6, 9])
async def test_a_priority_out_of_range_is_refused(store: Store, bad: object) -> None:
    item = dataclasses.replace(new("x"), priority=bad)
    with pytest.raises(ValueError, match="priority must be an int from 1"):
        await store.create_workflow(item, now=T0, lease=None, replace_live=False)


@pytest.mark.long  # 10,000 starts: 20 s to minutes, by backend
@pytest.mark.sql_only  # the claim's order is the SQL's; the server's path is tested above
async def test_ten_thousand_starts_of_three_tenants(store: Store) -> None:
    """10,000 starts queued by tenant: 9,890 of "bulk" first, then 100 of "mid", then 10 of
    "few" (the worst order for first in, first out). Claimed 10 at a time, as a saturated
    worker would: the 10 of "few" are all among the first 31 claims and the 100 of "mid" among
    the first 300, where first in, first out would put them after 9,890 others. Equal shares
    while each waits (one of each per round, ties going to the earlier start: few's 10th is
    claim 31, mid's 100th about claim 211), and "bulk" keeps its own order."""
    for i in range(9_890):
        await _start(store, f"bulk-{i:05d}", tenant="bulk")
    for i in range(100):
        await _start(store, f"mid-{i:03d}", tenant="mid")
    for i in range(10):
        await _start(store, f"few-{i:02d}", tenant="few")
    order = await _claim_keys(store, 400, limit=10)
    few = [n for n, key in enumerate(order) if key.startswith("few")]
    mid = [n for n, key in enumerate(order) if key.startswith("mid")]
    assert len(few) == 10 and max(few) < 31, few
    assert len(mid) == 100 and max(mid) < 300, mid
    bulk = [key for key in order if key.startswith("bulk")]
    assert bulk == sorted(bulk) and bulk[0] == "bulk-00000"
