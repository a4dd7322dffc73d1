"""The thread pools of synchronous activities, as the World sees them.

The engine decides to run a sync activity attempt when it hands the call to its thread pool;
a thread picks it up a moment later. On a loaded machine that moment can come late: meanwhile
the driver, seeing nothing run, would jump the clock, and another process could take the run
over, run the same step and commit it before the thread even starts. Both the decision and the
work in progress start at the hand-over, so the World counts a handed-over attempt as running
(idle detection waits for it) and records it as begun at the hand-over (``World.begin`` in the
thread takes the number given here).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
from collections.abc import Callable, Iterator
from typing import Any, ParamSpec, TypeVar
from unittest import mock

import sagaway._engine.engine
from sagaway._engine.threads import DaemonThreadPool
from tests.generative.world import World

P = ParamSpec("P")
T = TypeVar("T")


class HandoverPool(concurrent.futures.Executor):
    """Delegates to ``inner``; tells ``world`` when an attempt is handed over and when it is
    done (run, failed, or cancelled unrun at shutdown)."""

    def __init__(self, inner: concurrent.futures.Executor, world: World) -> None:
        self._inner = inner
        self._world = world

    def submit(
        self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs
    ) -> concurrent.futures.Future[T]:
        seq = self._world.handed_over()
        try:
            future = self._inner.submit(self._world.run_handed, seq, fn, *args, **kwargs)
        except BaseException:
            self._world.handover_done()
            raise
        future.add_done_callback(lambda _: self._world.handover_done())
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        self._inner.shutdown(wait, cancel_futures=cancel_futures)


@contextlib.contextmanager
def recording_handovers(
    world: World,
    inner: Callable[..., concurrent.futures.Executor] | None = None,
) -> Iterator[None]:
    """While open, every engine's sync-activity pool reports its hand-overs to ``world``
    (``inner``: what the pool wraps; the engine's own pool by default)."""
    make_inner = inner or DaemonThreadPool

    def pool(*args: Any, **kwargs: Any) -> HandoverPool:
        return HandoverPool(make_inner(*args, **kwargs), world)

    with mock.patch.object(sagaway._engine.engine, "DaemonThreadPool", pool):
        yield
