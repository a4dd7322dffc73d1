"""Closing a Manager leaves no lease behind (SQLite, PostgreSQL).

What a closing process holds it gives back (due now), so another process runs it at once
instead of waiting for the lease to expire. Two ways a lease was left held: a recovery claim
that was committing when ``close()`` began (the scan was cancelled, its leases never reached
the Worker), and an execution handed to the Worker just before it stopped (its task was
cancelled before it began, so it never released).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import sagaway as sw
from sagaway.recovery import RecoveryWorker
from sagaway.testing.internals import engine_of, store_of
from sagaway.worker import Worker

LEASE = 600.0
"""A lease left behind would keep the run from every other process for ten minutes."""


def define(manager: sw.Manager) -> sw.Manager:
    @manager.register_workflow(name="flow")
    async def flow() -> str:
        return "done"

    return manager


async def start_pending(db_url: str, key: str) -> None:
    """Start ``flow`` from a process without workers: PENDING, due now, no lease."""
    async with define(sw.Manager(db_url)).connect() as client:
        await client.workflow("flow").execute(idempotency_key=key)


async def runs_at_once_elsewhere(db_url: str, key: str) -> None:
    """Another process runs ``key`` now (10 s bound; a lease left held would take 600 s)."""
    async with define(sw.Manager(db_url, lease_timeout=LEASE, poll_interval=0.05)) as other:
        assert await other.get_workflow(key).result(timeout=10) == "done"


async def test_a_claim_under_way_when_close_begins_is_given_back(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    stopping = asyncio.Event()
    stop = RecoveryWorker.stop

    async def stop_noted(self: RecoveryWorker) -> None:
        stopping.set()
        await stop(self)

    monkeypatch.setattr(RecoveryWorker, "stop", stop_noted)
    manager = define(sw.Manager(db_url, lease_timeout=LEASE, poll_interval=0.05))
    claimed = asyncio.Event()
    async with manager:
        store = store_of(manager)
        claim = store.claim_due

        async def claim_until_close(**kwargs: Any) -> Any:
            got = await claim(**kwargs)  # committed
            if got:
                claimed.set()
                await stopping.wait()  # the answer arrives once close() has begun
            return got

        monkeypatch.setattr(store, "claim_due", claim_until_close)
        await start_pending(db_url, "claimed-at-close")
        await asyncio.wait_for(claimed.wait(), 10)
        await manager.close()
    await runs_at_once_elsewhere(db_url, "claimed-at-close")


async def test_an_execution_handed_over_just_before_the_worker_stops_is_given_back(
    db_url: str,
) -> None:
    await start_pending(db_url, "handed-at-stop")
    async with define(sw.Manager(db_url, lease_timeout=LEASE)).connect() as process:
        engine = engine_of(process)
        [(record, lease)] = await engine.claim_due(limit=1, exclude=(), queues=None)
        worker = Worker(engine, concurrency=1)
        worker.start()
        worker.dispatch(record, lease, steps=[])
        await worker.stop()  # before the execution's task ever ran
    await runs_at_once_elsewhere(db_url, "handed-at-stop")
