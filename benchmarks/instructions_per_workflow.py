"""Instructions per workflow on embedded SQLite, counted by valgrind, for A/B comparisons of
two trees that do not depend on the machine's load.

A 4-activity workflow (``four_steps``) is run one at a time, so that no two workflows share a
write transaction (group commits vary with timing) and nothing runs in parallel; the engine's
periodic loops (polling, recovery, lease renewal, and the SQLite WAL checkpoint thread, every
0.25 s) are set far beyond the run's length, since under valgrind (about 50 times slower) a
loop that wakes on a timer would be counted as work of the workflows, the more so the slower
the tree measured. (The WAL then grows to a few thousand pages, below SQLite's backstop.)
Run N and 3N workflows and divide the difference by 2N, so that start-up and warm-up cancel
out::

    for n in 200 600; do
      PYTHONPATH=src valgrind --tool=callgrind --callgrind-out-file=/dev/null \\
        python -m benchmarks.instructions_per_workflow $n 2>&1 | grep 'I   refs'
    done

The counts of one tree agree within about 1.5 % between runs (two runs of the same tree:
2,684,821 and 2,718,205 per workflow). ``--concurrency C`` runs C at a time instead (closer to
A_thr, noisier). Without valgrind it prints the CPU milliseconds per workflow.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time

import sagaway as sw
from sagaway.store.sqlite import checkpoint

WARM_UP = 100


def _no_timed_checkpoints() -> None:
    """The checkpoint thread's interval (a keyword default of ``Checkpointer``) set to an hour."""
    defaults = checkpoint.Checkpointer.__init__.__kwdefaults__
    if defaults is None or "interval" not in defaults:
        raise SystemExit("this tree's Checkpointer takes no interval: measure without it")
    defaults["interval"] = 3600.0


def _build(url: str) -> sw.Manager:
    manager = sw.Manager(url, poll_interval=3600.0, recovery_interval=3600.0, lease_timeout=36000.0)

    @manager.register_activity(name="step")
    async def step(i: int) -> int:
        return i

    @manager.register_workflow(name="four_steps")
    async def four_steps(i: int) -> int:
        return await step(i) + await step(i) + await step(i) + await step(i)

    return manager


async def _run(manager: sw.Manager, first: int, n: int, concurrency: int) -> None:
    gate = asyncio.Semaphore(concurrency)

    async def one(i: int) -> None:
        async with gate:
            await manager.workflow("four_steps", i).execute_get(idempotency_key=f"k{i}")

    await asyncio.gather(*(one(i) for i in range(first, first + n)))


async def main(n: int, concurrency: int) -> None:
    _no_timed_checkpoints()
    manager = _build(f"sqlite:///{tempfile.mkdtemp()}/engine.db")
    async with manager:
        await _run(manager, 0, WARM_UP, concurrency)
        cpu = time.process_time()
        await _run(manager, WARM_UP, n, concurrency)
        cpu = time.process_time() - cpu
    print(f"{n} workflows, {concurrency} at a time: {cpu / n * 1000:.3f} CPU ms per workflow")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("n", type=int, help="workflows measured (after 100 warm-up ones)")
    parser.add_argument("--concurrency", type=int, default=1, help="at a time (default 1)")
    args = parser.parse_args()
    asyncio.run(main(args.n, args.concurrency))
