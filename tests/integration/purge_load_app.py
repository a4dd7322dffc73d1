"""A worker process for tests/integration/test_purge_under_load.py: a Manager that runs a small
saga (reserve, charge, with a compensation registered) and keeps ``IN_FLIGHT`` of them going
under keys ``load-<worker>-<n>`` until its stdin closes.

    python -m tests.integration.purge_load_app URL WORKER_ID

It prints ``ready`` once its Manager runs.
"""

from __future__ import annotations

import asyncio
import sys

import sagaway as sw

IN_FLIGHT = 16
"""Sagas each worker keeps running at once."""


def build(url: str) -> sw.Manager:
    m = sw.Manager(url, poll_interval=0.2)

    @m.register_activity(name="reserve")
    async def reserve(order: int) -> str:
        return f"r-{order}"

    @m.register_activity(name="release")
    async def release(reservation: str) -> None:
        return None

    @m.register_activity(name="charge")
    async def charge(order: int) -> int:
        return order

    @m.register_workflow(name="saga")
    async def saga(order: int) -> int:
        compensations = sw.Saga()
        reservation = await reserve(order)
        compensations.add_compensation(release, reservation)
        return await charge(order)

    return m


async def main(url: str, worker: str) -> None:
    manager = build(url)
    stop = asyncio.Event()
    counter = iter(range(10**9))

    async def lane() -> None:
        while not stop.is_set():
            n = next(counter)
            await manager.workflow("saga", n).execute_get(idempotency_key=f"load-{worker}-{n}")

    async def watch_stdin() -> None:
        await asyncio.to_thread(sys.stdin.read)  # returns when the test closes our stdin
        stop.set()

    async with manager:
        print("ready", flush=True)
        lanes = [asyncio.create_task(lane()) for _ in range(IN_FLIGHT)]
        await watch_stdin()
        await asyncio.gather(*lanes)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
