"""The application of the priority and fairness tests with worker processes, run by `sagaway
worker` (priority_app:manager).

Environment: PRIORITY_DB_URL, PRIORITY_LOG (a file), PRIORITY_HANG_AFTER (default
``HANG_AFTER``), PRIORITY_LEASE (the lease in seconds, default ``LEASE``: short, so the priority
test's takeover of the killed worker's workflow comes soon; the fairness test gives a long one,
so that no live worker's lease can lapse under load). Each attempt of the activity `step`
(workflow `job`) and each run of the workflow `tick` (no activity: a trivial workflow) appends
``<n> <pid>`` to the log as it starts (one write to a file opened for appending, so lines from
several processes never mix). The first one to find more than PRIORITY_HANG_AFTER lines in the
log and no ``<log>.hang`` file writes its process id there and hangs until its process is
killed.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import sagaway as sw

HANG_AFTER = 8
LEASE = 2.0

manager = sw.Manager(
    os.environ.get("PRIORITY_DB_URL", "sqlite:///unused-priority.db"),
    lease_timeout=float(os.environ.get("PRIORITY_LEASE", LEASE)),
    poll_interval=0.1,
    recovery_interval=0.5,
)


def _log(n: int) -> bool:
    """Log this attempt; True if it is the one to hang."""
    log = Path(os.environ["PRIORITY_LOG"])
    with open(log, "a") as f:
        f.write(f"{n} {os.getpid()}\n")
    hang = Path(f"{log}.hang")
    if hang.exists():  # once it hangs, the log is never read again (10,000 lines)
        return False
    hang_after = int(os.environ.get("PRIORITY_HANG_AFTER", HANG_AFTER))
    if len(log.read_text().splitlines()) <= hang_after:
        return False
    try:
        with open(hang, "x") as f:
            f.write(str(os.getpid()))
    except FileExistsError:
        return False
    return True


@manager.register_activity
async def step(n: int) -> int:
    if _log(n):
        await asyncio.sleep(3600)  # until this process is killed
    await asyncio.sleep(0.3)  # the other worker claims meanwhile
    return n


@manager.register_workflow
async def job(n: int) -> int:
    return await step(n)


@manager.register_workflow
async def tick(n: int) -> int:
    if _log(n):
        await asyncio.sleep(3600)  # until this process is killed (its lease then expires)
    return n
