"""The application of the crashed-slot-holder test, run by `sagaway worker`
(limits_crash_app:manager).

Environment: LIMITS_DB_URL, LIMITS_MARKER (a file). The queue "solo" admits one activity at a
time in the whole cluster. The first attempt of `step` (no marker yet) writes its process id to
the marker and hangs, holding the queue's one slot until its process is killed; every later
attempt logs its start time to the marker's ``.done`` file and returns.
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import sagaway as sw

manager = sw.Manager(
    os.environ.get("LIMITS_DB_URL", "sqlite:///unused-limits.db"),
    lease_timeout=2.0,
    poll_interval=0.1,
    recovery_interval=0.5,
    queues={"solo": sw.Queue(concurrency=1, scope="cluster")},
)


def _first_attempt(key: str) -> bool:
    """True for the first attempt anywhere (it takes the marker); later ones log their start."""
    marker = Path(os.environ["LIMITS_MARKER"])
    try:
        with open(marker, "x") as f:
            f.write(str(os.getpid()))
    except FileExistsError:
        with open(f"{marker}.done", "a") as f:
            f.write(f"{key} {time.time()!r}\n")
        return False
    return True


@manager.register_activity(queue="solo")
async def step(key: str) -> str:
    if _first_attempt(key):
        await asyncio.sleep(3600)  # holds the slot until this process is killed
    return key


@manager.register_workflow
async def job(key: str) -> str:
    return await step(key)
