"""The Store contract of cluster-wide queue limits on every backend (``db_url``: SQLite,
PostgreSQL and the Engine Server in front of either): slots are counted per queue, a released
or expired slot frees its place, starts are spaced ``1/rate`` apart, a refused admission takes
nothing, and two stores on one database (two processes) share the same limits. A call refused
is kept in line (by run and call id): a slot goes only to the first live waiter by priority,
then by waiting time, and a crashed waiter's place lapses at its expiry.

Times are explicit (``now``), as the engine passes them, so no test sleeps.
"""

from __future__ import annotations

import asyncio

from sagaway.states import WorkflowStatus
from sagaway.store import Store
from sagaway.store.records import QueueAdmission, QueuePlace
from tests.store_helpers import run_of, running

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
    run_id: str = "",
    priority: int = 3,
) -> float | None:
    return await store.acquire_queue_slot(
        QueueAdmission(
            queue=queue,
            holder=holder,
            concurrency=concurrency,
            rate_per_second=rate,
            priority=priority,
            run_id=run_id,
            call_id="c1" if run_id else "",
        ),
        expires_at=now + ttl,
        now=now,
    )


async def _callers(store: Store, *keys: str) -> dict[str, str]:
    """A live (RUNNING) workflow per key, by key: its run id, to ask in line for."""
    for key in keys:
        await running(store, key)
    return {key: (await run_of(store, key)).run_id for key in keys}


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


async def test_a_free_slot_goes_to_the_first_waiter_by_priority_then_time(
    store: Store, other: Store
) -> None:
    run = await _callers(store, "low-a", "low-b", "high")

    async def ask(key: str, at: float) -> float | None:
        level = 5 if key == "high" else 1
        return await _acquire(
            other if key == "low-b" else store, key, now=at, concurrency=1, run_id=run[key],
            priority=level,
        )  # fmt: skip

    assert await _acquire(store, "first", concurrency=1) is None
    assert [await ask(key, T0 + 1 + i) for i, key in enumerate(["low-a", "low-b", "high"])] == [
        T0 + 1, T0 + 2, T0 + 3
    ]  # fmt: skip
    # Where each waits (read only): high first, then low-a, then low-b.
    assert [await other.queue_place(run[key], now=T0 + 3) for key in run] == [
        QueuePlace(queue="payments", priority=level, ahead=ahead)
        for level, ahead in ((1, 1), (1, 2), (5, 0))
    ]
    await store.release_queue_slot("payments", holder="first", now=T0 + 4)
    # The slot is free, but only the priority-5 call may take it, though it asked last.
    assert await ask("low-b", T0 + 5) == T0 + 5
    assert await ask("low-a", T0 + 5) == T0 + 5
    assert await ask("high", T0 + 6) is None
    await store.release_queue_slot("payments", holder="high", now=T0 + 7)
    # Equal priority: first in, first out (low-a asked first), whoever asks first now.
    assert await ask("low-b", T0 + 8) == T0 + 8
    assert await ask("low-a", T0 + 8) is None
    await store.release_queue_slot("payments", holder="low-a", now=T0 + 9)
    assert await ask("low-b", T0 + 9) is None
    # Admitted, a call leaves the line: a new asker is alone in it.
    await store.release_queue_slot("payments", holder="low-b", now=T0 + 10)
    assert await ask("low-a", T0 + 10) is None
    assert await store.queue_place(run["low-a"], now=T0 + 10) is None  # admitted: out of line


async def test_a_crashed_waiter_lapses_and_an_ended_one_is_passed_over(store: Store) -> None:
    ended_lease = await running(store, "ended")
    run = await _callers(store, "crashed", "next")
    run["ended"] = (await run_of(store, "ended")).run_id
    assert await _acquire(store, "first", concurrency=1) is None
    # Two priority-5 waiters: one whose process dies (it asks no more), one whose workflow ends.
    for key in ("crashed", "ended"):
        assert await _acquire(
            store, key, now=T0 + 1, concurrency=1, ttl=10, run_id=run[key], priority=5
        ) == T0 + 1  # fmt: skip
    await store.finish_workflow(
        run["ended"], token=ended_lease.token, status=WorkflowStatus.CANCELLED, result=None,
        error=None, now=T0 + 2,
    )  # fmt: skip
    await store.release_queue_slot("payments", holder="first", now=T0 + 2)
    # The crashed waiter keeps its place until its row expires (T0 + 11), not forever.
    assert await _acquire(store, "next", now=T0 + 10, concurrency=1, run_id=run["next"]) == (
        T0 + 10
    )
    assert await _acquire(store, "next", now=T0 + 11, concurrency=1, run_id=run["next"]) is None


async def test_a_release_wakes_the_first_waiters_workflow(store: Store) -> None:
    """The first waiter by the call's priority is woken, not the workflow of the highest
    priority nor the one waiting longest."""
    leases = {key: await running(store, key) for key in ("wf-old", "call-5")}
    for i, key in enumerate(leases):
        record = await run_of(store, key)
        assert await _acquire(
            store, key, now=T0 + i, concurrency=1, run_id=record.run_id, priority=3 + 2 * i
        ) == (None if i == 0 else T0 + i)  # fmt: skip
        await store.wait_workflow(
            record.run_id, token=leases[key].token, waiting_for="queue:payments",
            next_run_at=T0 + 100, step=None, now=T0 + 10 + i,
        )  # fmt: skip
    await store.release_queue_slot("payments", holder="wf-old", now=T0 + 20)
    due = {key: (await run_of(store, key)).next_run_at for key in leases}
    assert due == {"wf-old": T0 + 100, "call-5": T0 + 20}


async def test_free_slots_go_to_as_many_first_waiters(store: Store) -> None:
    run = await _callers(store, "a", "b", "c")
    for holder in ("x", "y"):
        assert await _acquire(store, holder) is None
    for i, key in enumerate(run):
        assert await _acquire(store, key, now=T0 + 1 + i, run_id=run[key]) == T0 + 1 + i
    for holder in ("x", "y"):
        await store.release_queue_slot("payments", holder=holder, now=T0 + 4)
    # Two free slots: the first two waiters may take them, in any order; not the third.
    assert await _acquire(store, "c", now=T0 + 5, run_id=run["c"]) == T0 + 5
    assert await _acquire(store, "b", now=T0 + 5, run_id=run["b"]) is None
    assert await _acquire(store, "c", now=T0 + 5, run_id=run["c"]) == T0 + 5
    assert await _acquire(store, "a", now=T0 + 5, run_id=run["a"]) is None


async def test_a_call_that_leaves_the_line_lets_the_next_one_in(store: Store, other: Store) -> None:
    run = await _callers(store, "cancelled", "next")
    assert await _acquire(store, "first", concurrency=1) is None
    first = await _acquire(store, "gone", concurrency=1, run_id=run["cancelled"], priority=5)
    assert first == T0
    await store.release_queue_slot("payments", holder="first", now=T0 + 1)
    assert await _acquire(other, "next", now=T0 + 1, concurrency=1, run_id=run["next"]) == T0 + 1
    # Its workflow lives on (compensating, say): the call leaves the line at once.
    await store.leave_queue("payments", run_id=run["cancelled"], call_id="c1", now=T0 + 2)
    assert await store.queue_place(run["cancelled"], now=T0 + 2) is None
    assert await _acquire(other, "next", now=T0 + 2, concurrency=1, run_id=run["next"]) is None
    await store.leave_queue("payments", run_id=run["cancelled"], call_id="c1", now=T0 + 3)  # no-op
