"""The workflows of `benchmarks.waiting_memory`, for `sagaway worker
benchmarks.waiting_memory_app:manager`: one waits on a timer, one for a signal. The Manager's
settings are the defaults (``poll_interval=1``, ``concurrency=100``)."""

from __future__ import annotations

import os

import sagaway as sw

TIMER_S = 30 * 86400.0
"""The template's sleep: far enough that no timer falls due while the worker is watched."""
TIMER = "bench.wait_timer"
SIGNAL = "bench.wait_signal"


def make_manager(url: str | None) -> sw.Manager:
    """A Manager with the two workflows: ``bench.wait_timer(n)`` sleeps ``TIMER_S`` and returns
    ``n``; ``bench.wait_signal(n)`` receives an int ``approval`` and returns ``n`` plus it."""
    manager = sw.Manager(url)

    @manager.register_workflow(name=TIMER)
    async def wait_timer(n: int) -> int:
        await manager.sleep(TIMER_S)
        return n

    @manager.register_workflow(name=SIGNAL)
    async def wait_signal(n: int) -> int:
        decision: int = await manager.signal("approval").receive(int)
        return n + decision

    return manager


manager = make_manager(os.environ.get("BENCH_WAITING_DB_URL"))
