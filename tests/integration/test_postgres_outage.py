"""PostgreSQL connections dropped mid-run: the engine reconnects and loses nothing."""

from __future__ import annotations

import asyncio
import collections
import uuid

import psycopg
import pytest

import sagaway as sw
from tests.conftest import POSTGRES_URL

N = 60


def _terminate(application_name: str) -> int:
    with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE application_name = %s AND pid <> pg_backend_pid()",
            (application_name,),
        ).fetchall()
    return len(rows)


@pytest.mark.postgres
@pytest.mark.slow
async def test_backends_terminated_during_a_run(postgres_url: str) -> None:
    db_url = postgres_url
    app = f"sagaway-outage-{uuid.uuid4().hex[:8]}"
    manager = sw.Manager(f"{db_url}&application_name={app}", poll_interval=0.05, lease_timeout=3)
    effects: collections.Counter[str] = collections.Counter()
    thresholds = [40, 100, 160]
    gates = {threshold: asyncio.Event() for threshold in thresholds}
    reached = asyncio.Event()

    @manager.register_activity
    async def step(name: str) -> str:
        effects[sw.activity_info().idempotency_key] += 1
        # Explicit synchronisation: work pauses at each threshold until connections are dropped.
        for threshold in thresholds:
            if len(effects) >= threshold and not gates[threshold].is_set():
                reached.set()
                await gates[threshold].wait()
        return name

    @manager.register_activity
    async def undo(name: str) -> None:
        effects[sw.activity_info().idempotency_key] += 1

    @manager.register_workflow
    async def saga(i: int) -> str:
        async with sw.Saga() as s:
            for name in ("a", "b", "c"):
                await step(f"{name}{i}")
                s.add_compensation(undo, f"{name}{i}")
            if i % 5 == 0:
                raise sw.CompletableError("declined")
        return await step(f"d{i}")

    terminated = 0
    async with manager:
        handles = [
            await manager.workflow(saga, i).execute(idempotency_key=f"s{i}") for i in range(N)
        ]
        for threshold in thresholds:
            await asyncio.wait_for(reached.wait(), 30)
            reached.clear()
            terminated += await asyncio.to_thread(_terminate, app)
            gates[threshold].set()
        outcomes = await asyncio.wait_for(
            asyncio.gather(*(h.result() for h in handles), return_exceptions=True), 120
        )
    assert terminated > 0, "the test did not drop any connection"
    for i, outcome in enumerate(outcomes):
        if i % 5 == 0:
            assert isinstance(outcome, sw.CompletableError), outcome
        else:
            assert outcome == f"d{i}"
    # Every effect recorded under its own idempotency key: 4 steps, or 3 steps + 3 undos.
    per_workflow = collections.Counter(key.split("/")[0] for key in effects)
    assert all(per_workflow[f"s{i}"] in (4, 6) for i in range(N))
    assert len(effects) == sum(6 if i % 5 == 0 else 4 for i in range(N))
