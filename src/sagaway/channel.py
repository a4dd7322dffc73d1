"""Channel: in-process fan-out of state-transition events.

Waiters for one workflow's end (``handle.result()``) and for its signals are woken here without
touching the database.
"""

from __future__ import annotations

import asyncio
import collections
import logging

from sagaway import events
from sagaway.store.records import WorkflowRecord

logger = logging.getLogger(__name__)


class Watch(asyncio.Event):
    """Set on a change of one execution; ``record`` holds its end when this process wrote it."""

    def __init__(self) -> None:
        super().__init__()
        self.record: WorkflowRecord | None = None


class Channel:
    """Fan-out of engine events to the waiters of this process."""

    def __init__(self) -> None:
        self._end_waiters: dict[str, set[Watch]] = collections.defaultdict(set)
        self._signal_waiters: dict[str, set[asyncio.Event]] = collections.defaultdict(set)

    def publish(self, event: events.Event) -> None:
        if isinstance(
            event, events.WorkflowEnded | events.WorkflowSuspended | events.WorkflowChanged
        ):
            for watch in self._end_waiters.get(event.run_id, ()):
                if isinstance(event, events.WorkflowEnded) and event.record is not None:
                    watch.record = event.record
                watch.set()
        elif isinstance(event, events.SignalSent):
            for waiter in self._signal_waiters.get(event.run_id, ()):
                waiter.set()

    def wake_all(self) -> None:
        """Wake every end waiter (they look again): changes elsewhere may have gone unheard."""
        for watches in self._end_waiters.values():
            for watch in watches:
                watch.set()

    def watch(self, run_id: str) -> Watch:
        """A Watch set when ``run_id`` ends, is suspended or changes in another process;
        release it with ``unwatch``."""
        watch = Watch()
        self._end_waiters[run_id].add(watch)
        return watch

    def unwatch(self, run_id: str, waiter: Watch) -> None:
        waiters = self._end_waiters.get(run_id)
        if waiters is not None:
            waiters.discard(waiter)
            if not waiters:
                del self._end_waiters[run_id]

    def watch_signals(self, run_id: str) -> asyncio.Event:
        """An Event set when a signal is sent to ``run_id`` from this process."""
        waiter = asyncio.Event()
        self._signal_waiters[run_id].add(waiter)
        return waiter

    def unwatch_signals(self, run_id: str, waiter: asyncio.Event) -> None:
        waiters = self._signal_waiters.get(run_id)
        if waiters is not None:
            waiters.discard(waiter)
            if not waiters:
                del self._signal_waiters[run_id]
