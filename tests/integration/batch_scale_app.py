"""A worker process for tests/integration/test_batch_scale.py: a Manager that runs the "job"
saga until its stdin closes.

    python -m tests.integration.batch_scale_app URL LOG_DIR

A job reserves (one line ``KEY`` appended to LOG_DIR/reserved), registers the release as its
compensation (one line ``KEY`` appended to LOG_DIR/released each time it runs), then works in
three rounds of a short activity and a durable sleep: a tenth of the jobs (index divisible by
10) sleep 0.05 s a round and complete soon, the others 30 s a round, so a batch cancel finds
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
                await m.sleep(0.05 if index % 10 == 0 else 30.0)
            return "done"

    return m


async def main(url: str, log_dir: str) -> None:
    async with build(url, Path(log_dir)):
        print("ready", flush=True)
        await asyncio.to_thread(sys.stdin.read)  # returns when the test closes our stdin


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
