"""One wait for a workflow's end (``_engine.end_wait``), whichever way it is asked for: its
deadline is fixed when the call is made, so an outage in the middle of the wait neither
restarts nor extends it, and it holds while the workflow runs in this very process.

On every backend (SQLite, PostgreSQL, through the Engine Server), with a fake clock: the
outage is the store of the open Manager failing as the test says (tests/integration/
test_client_outages.py has the real ones: a killed server, a cut connection).
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import math
import threading
from collections.abc import Callable, Coroutine
from typing import Any, Protocol

import pytest

import sagaway as sw
from sagaway.testing import FakeClock
from sagaway.testing.internals import manager_of
from tests.integration.test_client_outages import define, flaky

TIMEOUT = 10.0
POLL = 0.5
STEP = 0.1
OUTAGE = (2.0, 8.0)
"""When the store fails, in seconds from the call: a wait that started its timeout again at
the end of the outage would end at 18 s, one that restarted it at its start at 12 s."""

Wait = Callable[[sw.Manager], Coroutine[Any, Any, Any]]
WAYS: dict[str, Wait] = {
    # The handle execute() returned: it knows the run, and watches it at once.
    "started-handle": lambda m: _started(m),
    # A handle by key: the current run is read first.
    "handle-by-key": lambda m: m.get_workflow("w").result(timeout=TIMEOUT),
    # Start and wait in one call: the timeout bounds the wait, from the call.
    "execute_get": lambda m: m.workflow("flow").execute_get(idempotency_key="w", timeout=TIMEOUT),
}


async def _started(manager: sw.Manager) -> Any:
    handle = await manager.workflow("flow").execute(idempotency_key="w")
    return await handle.result(timeout=TIMEOUT)


class Clock(Protocol):
    """What the driver needs of a test clock."""

    def now(self) -> float: ...

    async def advance(self, seconds: float) -> None: ...

    def paused(self) -> bool:
        """Whether some task waits on the clock for at most ``POLL`` seconds (the wait's
        pauses; the engine's other timers are longer)."""
        ...


class Fake(FakeClock):
    def paused(self) -> bool:
        return any(seconds <= POLL + 1e-9 for _, seconds in self.pending())


async def drive(clock: Clock, task: asyncio.Future[Any], seconds: float = math.inf) -> None:
    """Move ``clock`` on ``STEP`` at a time for ``seconds`` (or until ``task`` is done), each
    step only once the wait is paused on the clock: time never passes while a read is in
    flight, so where the wait ends in virtual time does not depend on how fast the store is."""
    began = clock.now()
    while not task.done() and clock.now() - began < seconds - 1e-9:
        assert clock.now() - began < 30, "the wait did not end in time"
        async with asyncio.timeout(10):
            # Polled: the pause may be another thread's (a SyncClient's loop).
            while not task.done() and not clock.paused():  # noqa: ASYNC110
                await asyncio.sleep(0.001)
        if not task.done():
            await clock.advance(STEP)


async def through_an_outage(clock: Clock, store: Any, task: asyncio.Future[Any]) -> float:
    """Drive the wait ``task`` through an outage from ``OUTAGE[0]`` to ``OUTAGE[1]`` seconds
    from now, then until it ends; the seconds from now to its end."""
    began = clock.now()
    await drive(clock, task, OUTAGE[0])
    store.down = True
    await drive(clock, task, OUTAGE[1] - OUTAGE[0])
    assert not task.done()
    store.down = False
    await drive(clock, task)
    return clock.now() - began


@pytest.mark.parametrize("way", list(WAYS))
async def test_an_outage_in_the_middle_of_a_wait_does_not_move_its_deadline(
    db_url: str, way: str
) -> None:
    clock = Fake()
    manager = sw.Manager(db_url, clock=clock, poll_interval=POLL, unavailable_timeout=60)
    define(manager)
    async with manager.connect():
        await manager.workflow("flow").execute(idempotency_key="w")  # waits for a signal
        store = flaky(manager)
        task = asyncio.ensure_future(WAYS[way](manager))
        took = await through_an_outage(clock, store, task)
        with pytest.raises(TimeoutError, match=r"did not end within 10\.0s"):
            task.result()
        assert TIMEOUT <= took <= TIMEOUT + STEP + 1e-6


async def test_an_outage_at_the_deadline_ends_the_wait_at_the_deadline(db_url: str) -> None:
    """The store fails from 2 s on and does not come back within the budget: the wait ends at
    its own 10 s, not at the end of the budget (60 s)."""
    clock = Fake()
    manager = sw.Manager(db_url, clock=clock, poll_interval=POLL, unavailable_timeout=60)
    define(manager)
    async with manager.connect():
        handle = await manager.workflow("flow").execute(idempotency_key="w")
        store = flaky(manager)
        began = clock.now()
        task = asyncio.ensure_future(handle.result(timeout=TIMEOUT))
        await drive(clock, task, OUTAGE[0])
        store.down = True
        await drive(clock, task)
        with pytest.raises(TimeoutError, match="no answer before the timeout"):
            task.result()
        assert TIMEOUT <= clock.now() - began <= TIMEOUT + STEP + 1e-6
        store.down = False


async def test_the_deadline_holds_while_the_workflow_runs_in_this_process(db_url: str) -> None:
    """A workflow busy in an activity of this very process: its end would come on the
    Channel, but the wait still ends at its deadline."""
    clock = Fake()
    manager = sw.Manager(db_url, clock=clock, poll_interval=3600, lease_timeout=3600)
    entered, release = asyncio.Event(), asyncio.Event()

    @manager.register_activity(name="busy")
    async def busy() -> int:
        entered.set()
        await release.wait()
        return 1

    @manager.register_workflow(name="working")
    async def working() -> int:
        return await busy()

    async with manager:
        handle = await manager.workflow(working).execute(idempotency_key="busy")
        await asyncio.wait_for(entered.wait(), 10)
        began = clock.now()
        task = asyncio.ensure_future(handle.result(timeout=3))
        # Its pauses are poll_interval long (the end comes on the Channel), cut at 3 s.
        await clock.wait_for_sleep(3)
        await clock.advance(3)
        with pytest.raises(TimeoutError, match=r"within 3s \(status RUNNING in this process\)"):
            await asyncio.wait_for(task, 10)
        assert clock.now() - began == 3
        release.set()
        assert await handle.result(timeout=60) == 1


class ThreadedFakeClock:
    """A fake clock that another thread's event loop sleeps on (a SyncClient's), moved from
    the test's thread."""

    def __init__(self, start: float = 1_750_000_000.0) -> None:
        self._now = start
        self._lock = threading.Lock()
        self._seq = itertools.count()
        self._sleepers: list[
            tuple[float, int, float, asyncio.AbstractEventLoop, asyncio.Future[None]]
        ] = []

    def now(self) -> float:
        with self._lock:
            return self._now

    async def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        with self._lock:
            entry = (self._now + seconds, next(self._seq), seconds, loop, future)
            heapq.heappush(self._sleepers, entry)
        await future

    def paused(self) -> bool:
        with self._lock:
            return any(s <= POLL + 1e-9 and not f.done() for _, _, s, _, f in self._sleepers)

    async def advance(self, seconds: float) -> None:
        with self._lock:
            self._now += seconds
            due = []
            while self._sleepers and self._sleepers[0][0] <= self._now:
                due.append(heapq.heappop(self._sleepers))
        for *_, loop, future in due:
            loop.call_soon_threadsafe(_wake, future)
            # Until the woken task has run on: it is no longer paused.
            while not future.done():  # noqa: ASYNC110
                await asyncio.sleep(0.001)


def _wake(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


async def test_a_sync_client_wait_keeps_its_deadline_through_an_outage(db_url: str) -> None:
    clock = ThreadedFakeClock()
    manager = sw.Manager(db_url, clock=clock, poll_interval=POLL, unavailable_timeout=60)
    define(manager)
    sync = manager.sync()
    async with manager.connect():
        await manager.workflow("flow").execute(idempotency_key="w")
        await asyncio.to_thread(sync.open)
        try:
            store = flaky(manager_of(sync))
            task = asyncio.ensure_future(
                asyncio.to_thread(lambda: sync.get_workflow("w").result(timeout=TIMEOUT))
            )
            took = await through_an_outage(clock, store, task)
            with pytest.raises(TimeoutError, match=r"did not end within 10\.0s"):
                task.result()
            assert TIMEOUT <= took <= TIMEOUT + STEP + 1e-6
        finally:
            await asyncio.to_thread(sync.close)
