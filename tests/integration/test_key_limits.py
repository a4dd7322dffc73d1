"""Per-key workflow limits end to end, on every backend: 50 sagas of 5 customers, at most one
per customer at once, run by two Managers on one database (two processes, as far as the data
goes). Each saga's activities log their start and end; the intervals of one customer's sagas
never overlap, and all 50 complete. A saga blocked by its key holds no lease meanwhile."""

from __future__ import annotations

import asyncio
import itertools
import time
from typing import Any

import pytest

import sagaway as sw


def _manager(db_url: str, log: list[tuple[str, str, float, float]]) -> sw.Manager:
    manager = sw.Manager(db_url, poll_interval=0.05, recovery_interval=0.2, concurrency=20)

    @manager.register_activity
    async def reserve(customer: str, order: str) -> str:
        started = time.monotonic()
        await asyncio.sleep(0.01)
        log.append((customer, order, started, time.monotonic()))
        return f"res-{order}"

    @manager.register_activity
    async def release(reservation: str) -> None: ...

    @manager.register_activity
    async def charge(customer: str, order: str) -> str:
        started = time.monotonic()
        await asyncio.sleep(0.01)
        log.append((customer, order, started, time.monotonic()))
        return f"paid-{order}"

    @manager.register_workflow(max_per_key=1)
    async def checkout(customer: str, order: str) -> str:
        async with sw.Saga() as saga:
            reservation = await reserve(customer, order)
            saga.add_compensation(release, reservation)
            return await charge(customer, order)

    return manager


def _saga_spans(log: list[tuple[str, str, float, float]]) -> dict[str, list[tuple[float, float]]]:
    """Per customer: each saga's span, from its first activity's start to its last's end."""
    spans: dict[tuple[str, str], tuple[float, float]] = {}
    for customer, order, start, end in log:
        s, e = spans.get((customer, order), (start, end))
        spans[(customer, order)] = (min(s, start), max(e, end))
    out: dict[str, list[tuple[float, float]]] = {}
    for (customer, _), span in spans.items():
        out.setdefault(customer, []).append(span)
    return out


async def test_one_saga_per_customer_at_a_time(db_url: str) -> None:
    log: list[tuple[str, str, float, float]] = []
    first, second = _manager(db_url, log), _manager(db_url, log)
    orders = [(f"customer-{i % 5}", f"order-{i:02d}") for i in range(50)]
    async with first, second:
        handles = []
        for n, (customer, order) in enumerate(orders):
            starter = first if n % 2 == 0 else second
            handles.append(
                await starter.workflow("_manager.checkout", customer, order).execute(
                    idempotency_key=order, concurrency_key=customer
                )
            )
        results = await asyncio.wait_for(asyncio.gather(*(h.result() for h in handles)), 60)
        described = await handles[0].describe()
    assert results == [f"paid-{order}" for _, order in orders]
    assert described.concurrency_key == "customer-0"
    spans = _saga_spans(log)
    assert sorted(spans) == [f"customer-{i}" for i in range(5)]
    for customer, intervals in spans.items():
        assert len(intervals) == 10
        intervals.sort()
        for (_, end), (start, _) in itertools.pairwise(intervals):
            assert end <= start, f"two sagas of {customer} ran at once"


async def test_a_blocked_start_waits_pending_without_a_lease(db_url: str) -> None:
    log: list[tuple[str, str, float, float]] = []
    manager = sw.Manager(db_url, poll_interval=0.05)
    gate = asyncio.Event()

    @manager.register_activity
    async def hold(order: str) -> str:
        await gate.wait()
        return order

    @manager.register_workflow(max_per_key=1)
    async def job(order: str) -> str:
        return await hold(order)

    async with manager:
        a = await manager.workflow(job, "a").execute(idempotency_key="a", concurrency_key="c")
        b = await manager.workflow(job, "b").execute(idempotency_key="b", concurrency_key="c")

        async def running(handle: sw.WorkflowHandle[Any]) -> None:
            while True:
                if (await handle.describe()).status is sw.WorkflowStatus.RUNNING:
                    return
                await asyncio.sleep(0.02)

        await asyncio.wait_for(running(a), 10)
        # b stays PENDING with no owner for as long as a runs (several recovery scans).
        for _ in range(10):
            blocked = await b.describe()
            assert blocked.status is sw.WorkflowStatus.PENDING
            assert blocked.owner is None
            await asyncio.sleep(0.05)
        gate.set()
        assert await a.result(timeout=10) == "a"
        assert await b.result(timeout=10) == "b"
    assert log == []


@pytest.mark.parametrize("bad", ["", "x" * 513, "nul\x00"])
async def test_a_bad_key_is_refused(sqlite_url: str, bad: str) -> None:
    manager = sw.Manager(sqlite_url)

    @manager.register_workflow
    async def job() -> None: ...

    async with manager.connect():
        with pytest.raises(ValueError, match="concurrency_key"):
            await manager.workflow(job).execute(concurrency_key=bad)


def test_a_bad_limit_is_refused() -> None:
    manager = sw.Manager("sqlite:///unused.db")
    with pytest.raises(ValueError, match="max_per_key"):

        @manager.register_workflow(max_per_key=0)
        async def job() -> None: ...
