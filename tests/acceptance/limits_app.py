"""The application of the cluster-wide limit tests, run by `sagaway worker` (limits_app:manager).

Environment: LIMITS_DB_URL (the engine's database), LIMITS_LOG_DIR (a folder: each process
appends the start and end time of every activity attempt it runs to its own file). Activities
of the queue "api" share one limit across every process: 5 at once, 20 starts per second
(LIMITS_SCOPE=process makes it per process instead: the test then fails, as it must).
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Literal

import sagaway as sw

CONCURRENCY = 5
RATE = 20.0
SCOPE: Literal["process", "cluster"] = (
    "process" if os.environ.get("LIMITS_SCOPE") == "process" else "cluster"
)

manager = sw.Manager(
    os.environ.get("LIMITS_DB_URL", "sqlite:///unused-limits.db"),
    lease_timeout=5.0,
    poll_interval=0.1,
    recovery_interval=0.5,
    concurrency=20,  # a process takes at most 20 workflows: the three share the work
    queues={
        "api": sw.Queue(
            concurrency=CONCURRENCY,
            rate_per_second=RATE,
            scope=os.environ.get("LIMITS_SCOPE", "cluster"),
        )
    },
)


def _log(line: str) -> None:
    folder = Path(os.environ["LIMITS_LOG_DIR"])
    with open(folder / f"{os.getpid()}.log", "a") as f:
        f.write(line + "\n")


@manager.register_activity(queue="api")
async def call_api(key: str, seconds: float) -> str:
    started = time.time()
    await asyncio.sleep(seconds)
    _log(f"{started!r} {time.time()!r} {key}")
    return key


@manager.register_workflow
async def request(key: str, seconds: float) -> str:
    return await call_api(key, seconds)
