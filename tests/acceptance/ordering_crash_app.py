"""The application of the per-key order crash test, run by `sagaway worker`
(ordering_crash_app:manager), and its starter (``python -m tests.acceptance.ordering_crash_app
FIRST STEP COUNT``: starts posts FIRST, FIRST + STEP, ... of the line, in that order; with a
fourth argument ``debounce``: debounced starts of ``digest`` in one burst instead; ``burst``:
debounced starts of ``roundup``, whose run the burst test lets run).

Environment: ORDER_DB_URL, ORDER_LOG (a file every process appends to: the side record of what
ran, in the order it ran), ORDER_MARKER (a file). Every post of the line ``acct`` writes
``begin N`` and ``end N`` (each by an activity); post 0 first waits for the signal ``go`` (the
head of the line WAITING: nothing behind it runs); the first attempt of post 7's ``begin``
writes its process id to the marker and hangs until its process is killed.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time

import sagaway as sw

manager = sw.Manager(
    os.environ.get("ORDER_DB_URL", "sqlite:///unused-order.db"),
    lease_timeout=2.0,
    poll_interval=0.1,
    recovery_interval=0.5,
)
KILLED_AT = 7


def _log(line: str) -> None:
    with open(os.environ["ORDER_LOG"], "a") as f:
        f.write(f"{line} {time.time()!r}\n")


def _first_attempt() -> bool:
    """True for the first attempt anywhere (it takes the marker, writing its process id)."""
    try:
        with open(os.environ["ORDER_MARKER"], "x") as f:
            f.write(str(os.getpid()))
    except FileExistsError:
        return False
    return True


@manager.register_activity
async def begin(n: int) -> None:
    _log(f"begin {n}")
    if n == KILLED_AT and _first_attempt():
        await asyncio.sleep(3600)  # until this process is killed


@manager.register_activity
async def end(n: int) -> None:
    _log(f"end {n}")


@manager.register_workflow
async def post(n: int) -> int:
    if n == 0:
        await manager.signal("go").receive()
    await begin(n)
    await end(n)
    return n


@manager.register_workflow
async def digest(n: int) -> int:
    return n


@manager.register_activity
async def collect(n: int) -> int:
    """Logs ``collect N PID``; its first attempt anywhere hangs until its process is killed."""
    _log(f"collect {n} {os.getpid()}")
    if _first_attempt():
        await asyncio.sleep(3600)
    return n


@manager.register_workflow
async def roundup(n: int) -> int:
    """The debounced workflow of the burst test: one activity, given the last start's n."""
    return await collect(n)


async def _debounced(first: int, step: int, count: int) -> None:
    """Debounced starts of one burst; prints the run id each start was given."""
    async with manager.connect():
        for n in range(first, first + step * count, step):
            call = manager.workflow(digest, n)
            handle = await call.execute(
                idempotency_key=f"digest-{n}", debounce_key="inbox", debounce=3600.0
            )
            print(handle.run_id, flush=True)


BURST_WAIT = 5.0
"""The burst test's debounce: the run starts once no start came for this long."""


async def _burst(first: int, step: int, count: int) -> None:
    """Debounced starts of ``roundup``, one after another; prints the run id each was given."""
    async with manager.connect():
        for n in range(first, first + step * count, step):
            handle = await manager.workflow(roundup, n).execute(
                idempotency_key=f"roundup-{n}", debounce_key="tally", debounce=BURST_WAIT
            )
            print(handle.run_id, flush=True)


async def _start(first: int, step: int, count: int) -> None:
    async with manager.connect():
        for n in range(first, first + step * count, step):
            await manager.workflow(post, n).execute(
                idempotency_key=f"post-{n}", ordering_key="acct"
            )


if __name__ == "__main__":
    starters = {"debounce": _debounced, "burst": _burst}
    starter = starters[sys.argv[4]] if sys.argv[4:] else _start
    asyncio.run(starter(*(int(a) for a in sys.argv[1:4])))
