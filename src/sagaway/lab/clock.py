"""SimClock: virtual time for several concurrent sagas, with one deterministic interleaving.

The lab runs its services on a virtual clock so that every run prints the same log.
Here the sagas are real Sagaway workflows, run concurrently by the engine, and they interleave
through real database commits whose durations vary from run to run. To make the interleaving
deterministic anyway, the clock is a discrete-event scheduler:

* every saga workflow, and the lab's driver, is an **actor**: a task that runs inside
  ``async with clock.acting(name)`` (:meth:`SimClock.expect` announces one that is about to
  start, so that time waits for it);
* an actor runs only when the clock wakes it: entering ``acting`` parks it until its turn, and
  the clock wakes one actor only when **every live actor is parked** (in :meth:`SimClock.sleep`
  or at its entry). So exactly one actor runs at any moment, whatever the machine's speed;
* the next actor is the earliest sleeper by deadline, then by the virtual time its sleep began,
  then by the order the actors were announced: nothing that depends on real time;
* sleeps of tasks that are not actors (the engine's heartbeats, polls and scans) never hold
  time back; they wake when time passes their deadline.

An actor must only wait on the clock or on its own work: an actor blocked on something that
needs time to pass deadlocks the simulation (the lab runner guards every run with a real-time
timeout for that reason).
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
from collections.abc import AsyncIterator

from sagaway._tasks import cancel_and_wait


class SimClock:
    """A ``sagaway.clock.Clock`` that advances when all actors wait (see the module doc).

    Args:
        start: the epoch time of ``t = 0`` (the engine records times from this clock).
    """

    def __init__(self, start: float = 1_750_000_000.0) -> None:
        self.start = start
        self._now = start
        self._seq = itertools.count()
        self._sleepers: list[tuple[float, float, float, int, str | None, asyncio.Future[None]]] = []
        self._actors: dict[str, asyncio.Task[object] | None] = {}
        self._ranks: dict[str, int] = {}
        self._parked: set[str] = set()
        self._changed: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None

    # -- the Clock protocol --------------------------------------------------------------

    def now(self) -> float:
        return self._now

    async def sleep(self, seconds: float) -> None:
        actor = self._actor_of(asyncio.current_task())
        if seconds <= 0 and actor is None:
            await asyncio.sleep(0)
            return
        await self._park(actor, max(seconds, 0.0))

    async def _park(self, actor: str | None, seconds: float) -> None:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        rank = float("inf") if actor is None else float(self._ranks[actor])
        entry = (self._now + seconds, self._now, rank, next(self._seq), actor, future)
        heapq.heappush(self._sleepers, entry)
        if actor is not None:
            self._parked.add(actor)
        self._kick()
        try:
            await future
        finally:
            if not future.done():  # cancelled while asleep
                future.cancel()
                if actor is not None:
                    self._parked.discard(actor)
                self._kick()

    # -- actors ----------------------------------------------------------------------------

    @property
    def elapsed(self) -> float:
        """Virtual seconds since ``start``."""
        return self._now - self.start

    def expect(self, actor: str) -> None:
        """Hold time for ``actor``, which is about to start (e.g. a workflow just submitted)."""
        self._ranks.setdefault(actor, len(self._ranks))
        self._actors.setdefault(actor, None)

    @contextlib.asynccontextmanager
    async def acting(self, actor: str) -> AsyncIterator[None]:
        """Run the current task as ``actor`` until the block ends; it starts on its turn."""
        self.expect(actor)
        self._actors[actor] = asyncio.current_task()
        try:
            await self._park(actor, 0.0)
            yield
        finally:
            self._actors.pop(actor, None)
            self._parked.discard(actor)
            self._kick()

    def _actor_of(self, task: asyncio.Task[object] | None) -> str | None:
        if task is None:
            return None
        for name, actor_task in self._actors.items():
            if actor_task is task:
                return name
        return None

    # -- scheduling ------------------------------------------------------------------------

    def _kick(self) -> None:
        if self._changed is not None:
            self._changed.set()

    def _step(self) -> None:
        """If every live actor is parked, wake the earliest sleeper.

        A woken actor runs alone until it parks again. A woken non-actor (engine internals)
        does not hold time, but gets a turn of the event loop before time moves on, so it reads
        its own deadline as the time.
        """
        if not self._actors or any(name not in self._parked for name in self._actors):
            return
        while self._sleepers:
            deadline, _, _, _, actor, future = heapq.heappop(self._sleepers)
            if future.done():
                continue
            self._now = max(self._now, deadline)
            future.set_result(None)
            if actor is not None:
                self._parked.discard(actor)
            else:
                self._kick()
            return

    async def _schedule(self) -> None:
        assert self._changed is not None
        while True:
            await self._changed.wait()
            self._changed.clear()
            # Let every task that became ready run up to its next wait before deciding.
            for _ in range(3):
                await asyncio.sleep(0)
            self._step()

    async def __aenter__(self) -> SimClock:
        self._changed = asyncio.Event()
        self._task = asyncio.create_task(self._schedule(), name="sagaway-lab-simclock")
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await cancel_and_wait(self._task)
        self._task = None
        self._changed = None
