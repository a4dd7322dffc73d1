"""A worker process with a schedule every second, for tests/acceptance/test_schedule_processes.py.

``python -m tests.acceptance.schedule_app URL SECONDS``: opens a Manager with workers (which
writes the declared schedule), runs for SECONDS of real time, closes, and prints one JSON line:
the ticks its scheduler won (``fired``) and the executions its worker ran (``ran``).
"""

from __future__ import annotations

import asyncio
import json
import sys

import sagaway as sw


def build(url: str, ran: list[str]) -> sw.Manager:
    manager = sw.Manager(url, poll_interval=0.2, lease_timeout=5.0)

    @manager.register_activity(name="note")
    async def note() -> None:
        ran.append(sw.activity_info().workflow_key)

    @manager.register_workflow(name="tick", schedule="* * * * * *", schedule_id="every-second")
    async def tick() -> None:
        await note()

    return manager


async def main(url: str, seconds: float) -> None:
    ran: list[str] = []
    manager = build(url, ran)
    async with manager:
        print("ready", flush=True)
        await asyncio.sleep(seconds)
        scheduler = manager.scheduler
    # Counted after the close: a tick whose start was being committed when the sleep ended
    # lands in the database, and must be in the count too.
    fired = scheduler.fired if scheduler is not None else -1
    print(json.dumps({"fired": fired, "ran": ran}), flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], float(sys.argv[2])))
