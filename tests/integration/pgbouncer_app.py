"""A worker process for tests/integration/test_pgbouncer_sagas.py: a Manager on a PostgreSQL URL
through PgBouncer that runs the ``trip`` saga until its stdin closes.

    python -m tests.integration.pgbouncer_app URL

It prints ``ready`` once its Manager runs.

``trip(n)``: reserve (compensated by ``release``), a durable timer, then a signal ``go``: True
books and completes; False fails the saga with a completable error after the compensation ran.
"""

from __future__ import annotations

import asyncio
import os
import sys

import sagaway as sw

TIMER = 0.3
"""Seconds of the saga's durable timer."""


def build(url: str) -> sw.Manager:
    # A few workflows at a time each: the two workers share the sagas.
    m = sw.Manager(url, poll_interval=0.2, concurrency=10)

    @m.register_activity(name="reserve")
    async def reserve(n: int) -> str:
        return f"seat-{n}@{os.getpid()}"

    @m.register_activity(name="release")
    async def release(seat: str) -> None:
        return None

    @m.register_activity(name="book")
    async def book(seat: str) -> str:
        return f"booked {seat} by {os.getpid()}"

    @m.register_workflow(name="trip")
    async def trip(n: int) -> str:
        async with sw.Saga() as saga:
            seat = await reserve(n)
            saga.add_compensation(release, seat)
            await m.sleep(TIMER)
            go = await m.signal("go").receive(bool, timeout=120)
            if not go:
                raise sw.CompletableError(f"trip {n} declined", code="declined")
            return await book(seat)

    return m


async def main(url: str) -> None:
    manager = build(url)
    async with manager:
        print("ready", flush=True)
        await asyncio.to_thread(sys.stdin.read)  # returns when the test closes our stdin


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
