"""The workflow of the waiting benchmark, for `sagaway worker benchmarks.waiting_app:manager`."""

from __future__ import annotations

import os

import sagaway as sw

manager = sw.Manager(
    os.environ.get("BENCH_WAITING_DB_URL"),
    poll_interval=0.2,
    concurrency=int(os.environ.get("BENCH_WAITING_CONCURRENCY", "200")),
)


@manager.register_workflow(name="bench.await_approval")
async def await_approval(n: int) -> int:
    decision: int = await manager.signal("approval").receive(int)
    return n + decision
