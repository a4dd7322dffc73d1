"""A worker process for tests/integration/test_batch_scale.py: a Manager that runs the "job"
saga until its stdin closes.

    python -m tests.integration.batch_scale_app URL LOG_DIR [LANES]

A job reserves (one line ``KEY`` appended to LOG_DIR/reserved), registers the release as its
compensation (one line ``KEY`` appended to LOG_DIR/released each time it runs), then works in
three rounds of a short activity and a durable sleep: a tenth of the jobs (index divisible by
10) sleep 0.05 s a round and complete soon, the others an hour a round, so a batch cancel finds
them running, waiting or still pending. It prints ``ready`` once its Manager runs.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import sagaway as sw


def _append(path: Path, line: str) -> None:
    # One write of a short line to a file opened O_APPEND: lines of several processes do not
    # interleave.
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


def build(url: str, log_dir: Path) -> sw.Manager:
    m = sw.Manager(url, poll_interval=0.1, recovery_interval=3600.0, concurrency=200)

    @m.register_activity(name="reserve")
    async def reserve(key: str) -> str:
        _append(log_dir / "reserved", key)
        return key

    @m.register_activity(name="release")
    async def release(key: str) -> None:
        _append(log_dir / "released", key)

    @m.register_activity(name="work")
    async def work(key: str, round: int) -> int:
        await asyncio.sleep(0.01)
        return round

    @m.register_workflow(name="job")
    async def job(key: str, index: int) -> str:
        async with sw.Saga() as saga:
            saga.add_compensation(release, await reserve(key))
            for round in range(3):
                await work(key, round)
                await m.sleep(0.05 if index % 10 == 0 else 3600.0)
            return "done"

    @m.register_workflow(name="quick")
    async def quick(n: int) -> int:
        return await work(str(n), n)

    return m


async def main(url: str, log_dir: str, lanes: int) -> None:
    """Run jobs until stdin closes; with ``lanes``, also keep that many "quick" workflows
    going (keys ``load-<pid>-<n>``), the regular traffic whose throughput a test measures."""
    manager = build(url, Path(log_dir))
    stop = asyncio.Event()
    counter = iter(range(10**9))

    async def lane() -> None:
        while not stop.is_set():
            n = next(counter)
            key = f"load-{os.getpid()}-{n}"
            await manager.workflow("quick", n).execute_get(idempotency_key=key)

    async with manager:
        print("ready", flush=True)
        running = [asyncio.create_task(lane()) for _ in range(lanes)]
        await asyncio.to_thread(sys.stdin.read)  # returns when the test closes our stdin
        stop.set()
        await asyncio.gather(*running)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 0))
