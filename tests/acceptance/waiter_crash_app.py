"""The application of the crashed-queue-waiter test, run by `sagaway worker`
(waiter_crash_app:manager).

Environment: WAITER_DB_URL. The queue "solo" admits one activity at a time in the whole cluster.
``vip`` (task queue "vip") calls ``step`` at priority 5, ``low`` (task queue "default") at
priority 1; ``step`` returns the time it began.
"""

from __future__ import annotations

import os
import time

import sagaway as sw

manager = sw.Manager(
    os.environ.get("WAITER_DB_URL", "sqlite:///unused-waiters.db"),
    lease_timeout=2.0,
    poll_interval=0.1,
    recovery_interval=0.5,
    queues={"solo": sw.Queue(concurrency=1, scope="cluster")},
)


@manager.register_activity(queue="solo")
async def step(tag: str) -> float:
    return time.time()


@manager.register_workflow(task_queue="vip")
async def vip() -> float:
    return await manager.activity(step, "vip").execute_get(priority=5)


@manager.register_workflow
async def low() -> float:
    return await manager.activity(step, "low").execute_get(priority=1)
