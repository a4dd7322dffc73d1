"""The Store contract of cluster-wide queue limits on every backend (``db_url``: SQLite,
PostgreSQL and the Engine Server in front of either): slots are counted per queue, a released
or expired slot frees its place, starts are spaced ``1/rate`` apart, a refused admission takes
nothing, and two stores on one database (two processes) share the same limits.

Times are explicit (``now``), as the engine passes them, so no test sleeps.
"""

from __future__ import annotations

import asyncio

from sagaway.store import Store
from sagaway.store.records import QueueAdmission
from tests.store_helpers import running

T0 = 1_000_000.0


async def _acquire(
    store: Store,
    holder: str,
    *,
    now: float = T0,
    concurrency: int | None = 2,
    rate: float | None = None,
    queue: str = "payments",
    ttl: float = 30.0,
) -> float | None:
    return await store.acquire_queue_slot(
        QueueAdmission(queue=queue, holder=holder, concurrency=concurrency, rate_per_second=rate),
        expires_at=now + ttl,
        now=now,
    )


async def test_slots_are_counted_per_queue_and_shared_by_stores(store: Store, other: Store) -> None:
    assert await _acquire(store, "a") is None
    assert await _acquire(other, "b") is None
    # Full: refused with "try again after a release" (now), nothing taken.
    assert await _acquire(store, "c") == T0
    assert await _acquire(other, "c", queue="emails") is None  # another queue is not held up
    # A holder asking again keeps its one slot (a repeated call after a lost reply).
    assert await _acquire(store, "a") is None
    await other.release_queue_slot("payments", holder="a", now=T0)
    assert await _acquire(store, "c") is None
    assert await _acquire(store, "d") == T0
    await store.release_queue_slot("payments", holder="nobody", now=T0)  # no-op


async def test_a_crashed_holders_slot_expires_unless_renewed(store: Store, other: Store) -> None:
    assert await _acquire(store, "crashed", concurrency=1, ttl=10) is None
    assert await _acquire(store, "alive", concurrency=1, now=T0 + 5) == T0 + 5
    # Renewed while it runs, a slot stays; a crashed holder renews no more and its slot lapses.
    assert await store.renew_queue_slot(
        "payments", holder="crashed", expires_at=T0 + 12, now=T0 + 9
    )
    assert await _acquire(other, "alive", concurrency=1, now=T0 + 11) == T0 + 11
    assert await _acquire(other, "alive", concurrency=1, now=T0 + 12) is None
    assert not await store.renew_queue_slot(
        "payments", holder="crashed", expires_at=T0 + 40, now=T0 + 12
    )


async def test_starts_are_spaced_by_the_rate(store: Store, other: Store) -> None:
    assert await _acquire(store, "a", concurrency=None, rate=4) is None
    # The next start is allowed 1/rate later; a refusal says when and takes nothing.
    assert await _acquire(other, "b", concurrency=None, rate=4, now=T0 + 0.1) == T0 + 0.25
    assert await _acquire(other, "b", concurrency=None, rate=4, now=T0 + 0.2) == T0 + 0.25
    assert await _acquire(other, "b", concurrency=None, rate=4, now=T0 + 0.25) is None
    assert await _acquire(store, "c", concurrency=None, rate=4, now=T0 + 0.3) == T0 + 0.5


async def test_rate_and_concurrency_together(store: Store) -> None:
    assert await _acquire(store, "a", concurrency=1, rate=10) is None
    assert await _acquire(store, "b", concurrency=1, rate=10, now=T0 + 0.05) == T0 + 0.1
    assert await _acquire(store, "b", concurrency=1, rate=10, now=T0 + 0.2) == T0 + 0.2  # full
    await store.release_queue_slot("payments", holder="a", now=T0)
    assert await _acquire(store, "b", concurrency=1, rate=10, now=T0 + 0.2) is None


async def test_concurrent_admissions_never_exceed_the_limit(store: Store, other: Store) -> None:
    results = await asyncio.gather(
        *(_acquire(s, f"h{i}", concurrency=3) for i, s in enumerate([store, other] * 10))
    )
    assert sum(r is None for r in results) == 3


async def test_a_release_makes_the_longest_waiter_due(store: Store) -> None:
    leases = {}
    for i, key in enumerate(["w-old", "w-new", "w-timer"]):
        leases[key] = await running(store, key, now=T0 + i)
    for i, (key, waiting_for) in enumerate(
        [("w-old", "queue:payments"), ("w-new", "queue:payments"), ("w-timer", "timer")]
    ):
        record = await store.get_workflow(key)
        assert record is not None
        await store.wait_workflow(
            record.run_id, token=leases[key].token, waiting_for=waiting_for,
            next_run_at=T0 + 100, step=None, now=T0 + 10 + i,
        )  # fmt: skip
    assert await _acquire(store, "a", concurrency=1, now=T0 + 20) is None
    await store.release_queue_slot("payments", holder="a", now=T0 + 21)
    due = {
        key: (await store.get_workflow(key)).next_run_at  # type: ignore[union-attr]
        for key in leases
    }
    assert due == {"w-old": T0 + 21, "w-new": T0 + 100, "w-timer": T0 + 100}
    # A release of a slot nobody held wakes nobody.
    await store.release_queue_slot("payments", holder="a", now=T0 + 22)
    assert (await store.get_workflow("w-new")).next_run_at == T0 + 100  # type: ignore[union-attr]
