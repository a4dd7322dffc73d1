"""A workflow that writes a stream, run as its own process for the kill -9 test of readers.

    python streams_app.py DB_URL KEY N GATE_FILE

Runs a worker, starts (or attaches to) the workflow KEY, which appends 0..N-1 to the stream
``tokens``, each followed by the activity ``gate``. While GATE_FILE does not exist, ``gate(HANG)``
prints ``HANGING`` and blocks, so the test can kill -9 the process there (every item up to
HANG written, the rest not). Prints ``RESULT <n>`` once the workflow has ended.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import sagaway as sw

DB_URL, KEY, N, GATE = sys.argv[1], sys.argv[2], int(sys.argv[3]), Path(sys.argv[4])
HANG = 5

manager = sw.Manager(DB_URL, lease_timeout=1.0, poll_interval=0.05, recovery_interval=0.2)


@manager.register_activity
async def gate(i: int) -> int:
    if i == HANG and not GATE.exists():
        print("HANGING", flush=True)
        await asyncio.Event().wait()
    return i


@manager.register_workflow
async def producer(n: int) -> int:
    for i in range(n):
        await sw.write_stream("tokens", {"i": i})
        await manager.activity(gate, i).execute_get()
    return n


async def main() -> None:
    async with manager:
        handle = await manager.workflow(producer, N).execute(idempotency_key=KEY)
        print(f"RESULT {await handle.result(timeout=120)}", flush=True)


if __name__ == "__main__":
    asyncio.run(main())
