"""An activity attempt begins only under a lease known to be held (SQLite, PostgreSQL).

A process whose heartbeat cannot reach the database keeps running its event loop: a run that
waited for a worker slot, or a retry whose backoff ended, could start an activity after its
lease expired and another process took the run over (and ran the activity too). The engine
knows until when each lease was last renewed; in the last third of that time or later, it
renews the lease before the attempt. After waiting for a slot, an attempt also checks that its
run still acts (a ``gather`` branch can outlive its run).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import AsyncIterator, Collection
from typing import Any

import pytest

import sagaway as sw
from sagaway.store import Store
from sagaway.testing import FakeClock
from sagaway.testing.internals import engine_of, store_of

LEASE = 60.0


def stall_heartbeats(manager: sw.Manager, stalled: asyncio.Event) -> list[list[str]]:
    """Make the heartbeat's renewals (they carry every lease the worker holds, so more than
    one token) hang until the test ends; a renewal of one lease goes through. Returns the
    token lists of the renewals that went through."""
    store = store_of(manager)
    renew = store.renew_leases
    through: list[list[str]] = []

    async def renew_leases(tokens: Collection[str], *, expires_at: float) -> set[str]:
        tokens = list(tokens)
        if len(tokens) > 1:
            stalled.set()
            await asyncio.Event().wait()  # as a database that never answers
        through.append(tokens)
        return await renew(tokens, expires_at=expires_at)

    store.renew_leases = renew_leases  # type: ignore[method-assign]
    return through


async def take_over(manager: sw.Manager, other: Store, *keys: str) -> list[str]:
    """Another process claims every run whose lease expired, for longer than the test runs:
    which of ``keys`` it got. It reads the engine's time (on PostgreSQL, the server's clock
    seen through the test's)."""
    now = engine_of(manager).clock.now()
    claimed = await other.claim_due(
        owner="other-process", now=now, lease_timeout=LEASE * 100, limit=10, exclude=()
    )
    return sorted(record.key for record, _lease in claimed if record.key in keys)


async def until_gone(manager: sw.Manager, key: str) -> None:
    """Wait until the worker of ``manager`` no longer runs ``key``."""
    worker = manager.worker
    assert worker is not None
    run_id = (await manager.get_workflow(key).describe()).run_id
    while worker.is_running(run_id):
        worker.execution_left.clear()
        if worker.is_running(run_id):
            await asyncio.wait_for(worker.execution_left.wait(), 10)


def build(
    db_url: str,
    clock: FakeClock,
    effects: list[str],
    release: asyncio.Event,
    *,
    concurrency: int = 1,
) -> tuple[sw.Manager, Any, Any]:
    # Recovery polls far apart: the test decides who claims what.
    manager = sw.Manager(
        db_url, clock=clock, concurrency=concurrency, lease_timeout=LEASE, poll_interval=10_000.0
    )

    @manager.register_activity
    async def hold() -> str:
        await release.wait()  # holds the only worker slot
        return "held"

    @manager.register_activity
    async def charge(who: str) -> str:
        effects.append(who)
        return "charged"

    @manager.register_workflow
    async def blocker() -> str:
        return await hold()

    @manager.register_workflow
    async def pay(who: str) -> str:
        return await charge(who)

    return manager, blocker, pay


@dataclasses.dataclass
class Scene:
    """One worker slot held by ``blocker``; ``pay`` created here behind it; heartbeats hang."""

    clock: FakeClock
    manager: sw.Manager
    effects: list[str]
    through: list[list[str]]
    """Renewals of one lease that went through (the run's own)."""
    blocker: Any
    pay: Any
    release: asyncio.Event
    stalled: asyncio.Event

    async def pay_later(self, seconds: float) -> sw.WorkflowHandle[Any]:
        """Start ``blocker`` then ``pay``, let ``seconds`` pass while the heartbeat hangs."""
        manager = self.manager
        await manager.workflow(self.blocker).execute(idempotency_key="blocker")
        handle = await manager.workflow(self.pay, "here").execute(idempotency_key="pay")
        await self.clock.advance(seconds)
        await asyncio.wait_for(self.stalled.wait(), 10)
        return handle


@contextlib.asynccontextmanager
async def scene(db_url: str) -> AsyncIterator[Scene]:
    clock = FakeClock()
    effects: list[str] = []
    release, stalled = asyncio.Event(), asyncio.Event()
    manager, blocker, pay = build(db_url, clock, effects, release)
    async with manager:
        through = stall_heartbeats(manager, stalled)
        yield Scene(clock, manager, effects, through, blocker, pay, release, stalled)


async def test_a_run_that_waited_for_a_slot_past_its_lease_does_not_act_once_taken_over(
    db_url: str, other: Store
) -> None:
    """``pay`` is created here with a lease and waits for the only slot. The heartbeat hangs,
    the lease expires, another process takes ``pay`` over; when the slot frees, the run here
    must not charge (the other process does)."""
    async with scene(db_url) as it:
        await it.pay_later(LEASE + 1)
        assert await take_over(it.manager, other, "pay") == ["pay"]
        it.release.set()
        await until_gone(it.manager, "pay")
        assert it.effects == [], "the run charged after another process took it over"
        assert len(it.through) == 1, "the run renewed its own lease once before the attempt"


async def test_a_run_whose_heartbeat_hangs_renews_its_lease_and_goes_on(db_url: str) -> None:
    """Without a takeover the run's own renewal succeeds: the activity runs once, the run
    completes."""
    async with scene(db_url) as it:
        handle = await it.pay_later(LEASE + 1)
        it.release.set()
        assert await asyncio.wait_for(handle.result(), 10) == "charged"
        assert it.effects == ["here"]


@pytest.mark.parametrize("sync", [False, True], ids=["async", "sync"])
async def test_a_retry_after_the_lease_lapsed_does_not_run_once_taken_over(
    db_url: str, other: Store, sync: bool
) -> None:
    """An attempt fails with a retryable error; during its backoff the heartbeat hangs and
    another process takes the run over. The retry must not run here."""
    clock = FakeClock()
    attempts: list[int] = []
    release, stalled = asyncio.Event(), asyncio.Event()
    manager, blocker, _ = build(db_url, clock, [], release, concurrency=2)
    backoff = LEASE * 2
    retry = sw.RetryPolicy(initial_interval=backoff, maximum_interval=backoff, maximum_attempts=5)

    def flaky_sync() -> str:
        attempts.append(sw.activity_info().attempt)
        raise sw.RetryableError("busy")

    async def flaky_async() -> str:
        return flaky_sync()

    flaky: Any = manager.register_activity(retry=retry)(flaky_sync if sync else flaky_async)

    @manager.register_workflow
    async def flow() -> list[Any]:
        return list(await asyncio.gather(flaky(), return_exceptions=True))

    async with manager:
        stall_heartbeats(manager, stalled)
        # The blocker holds a second lease here, so the heartbeat renews two (and hangs).
        await manager.workflow(blocker).execute(idempotency_key="blocker")
        await manager.workflow(flow).execute(idempotency_key="flow")
        await clock.wait_for_sleep(backoff)  # the first attempt failed
        assert attempts == [1]
        await clock.advance(LEASE + 1)
        await asyncio.wait_for(stalled.wait(), 10)
        assert await take_over(manager, other, "flow") == ["flow"]
        await clock.advance(LEASE)  # the backoff ends
        await until_gone(manager, "flow")
        assert attempts == [1], "a retry ran after another process took the run over"
        release.set()


async def test_a_store_error_while_confirming_the_lease_is_not_the_activitys_failure(
    db_url: str,
) -> None:
    """The run's own renewal fails (the database is unreachable): the attempt never began, so
    nothing records it as failed; the run resumes later and charges once."""
    async with scene(db_url) as it:
        store = store_of(it.manager)
        renew = store.renew_leases
        failed: list[list[str]] = []

        async def unreachable_once(tokens: Collection[str], *, expires_at: float) -> set[str]:
            if len(list(tokens)) == 1 and not failed:  # the run's own, not a heartbeat
                failed.append(list(tokens))
                raise ConnectionError("the database went away")
            return await renew(tokens, expires_at=expires_at)

        store.renew_leases = unreachable_once  # type: ignore[method-assign]
        handle = await it.pay_later(LEASE + 1)
        it.release.set()
        assert await it.clock.run_until(handle.result(), timeout=20) == "charged"
        assert failed, "the run's renewal was not tried"
        assert it.effects == ["here"]
        steps = await store.load_steps((await handle.describe()).run_id)
        assert [(s.name.rsplit(".", 1)[-1], s.status.value, s.attempts) for s in steps] == [
            ("charge", "COMPLETED", 1)
        ]


async def test_a_renewal_answered_too_late_is_made_again(db_url: str, other: Store) -> None:
    """The run's own renewal is held up on its way back past the expiry it set, and another
    process takes the run over meanwhile: the attempt must not begin on that answer."""
    async with scene(db_url) as it:
        store = store_of(it.manager)
        renew = store.renew_leases
        taken: list[list[str]] = []

        async def answered_late(tokens: Collection[str], *, expires_at: float) -> set[str]:
            kept = await renew(tokens, expires_at=expires_at)  # committed
            if len(list(tokens)) == 1 and not taken:  # the run's own, not a heartbeat
                await it.clock.advance(LEASE + 1)  # the answer is slow to come back
                taken.append(await take_over(it.manager, other, "pay"))
            return kept

        store.renew_leases = answered_late  # type: ignore[method-assign]
        await it.pay_later(LEASE + 1)
        it.release.set()
        await until_gone(it.manager, "pay")
        assert taken == [["pay"]]
        assert it.effects == [], "the run charged on a renewal whose lease had lapsed"


async def test_a_lease_in_its_last_third_is_renewed_before_an_attempt(db_url: str) -> None:
    """Processes' clocks differ a little: an attempt does not begin on a lease close to its
    expiry (its last third) without renewing it first."""
    async with scene(db_url) as it:
        handle = await it.pay_later(LEASE * 2 / 3 + 1)  # not expired
        it.release.set()
        assert await asyncio.wait_for(handle.result(), 10) == "charged"
        assert it.effects == ["here"]
        assert len(it.through) == 1, "the attempt began without renewing the lease"


async def test_a_branch_left_waiting_for_a_queue_slot_starts_nothing_after_the_end(
    db_url: str,
) -> None:
    """``gather`` does not cancel a sibling when one branch fails: the run ends FAILED while
    ``charge`` still waits for its queue (a rate limit here); when the wait ends, the attempt
    must not begin (the run ended and gave its lease up)."""
    clock = FakeClock()
    interval = 3600.0
    manager = sw.Manager(
        db_url,
        clock=clock,
        lease_timeout=100 * interval,
        poll_interval=10 * interval,
        queues={"q": sw.Queue(rate_per_second=1 / interval)},
    )
    go = asyncio.Event()
    effects: list[str] = []

    @manager.register_activity(queue="q")
    async def tick() -> str:
        return "tick"

    @manager.register_activity(queue="q")
    async def charge() -> str:
        effects.append("charge")
        return "charged"

    @manager.register_activity
    async def refuse() -> str:
        await go.wait()
        raise sw.CompletableError("refused")

    @manager.register_workflow
    async def flow() -> list[str]:
        await tick()  # takes the queue's rate: the next attempt waits an interval
        return list(await asyncio.gather(refuse(), charge()))

    async with manager:
        handle = await manager.workflow(flow).execute(idempotency_key="flow")
        await clock.wait_for_sleep(interval)  # charge waits for its turn
        go.set()
        with pytest.raises(sw.CompletableError):
            await asyncio.wait_for(handle.result(), 10)
        await clock.advance(interval)
        await until_gone(manager, "flow")
        for _ in range(20):
            await asyncio.sleep(0)  # the left-over branch resumes (and gives up)
        assert effects == [], "a branch began an attempt after its run had ended"
