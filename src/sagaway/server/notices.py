"""Wake-ups for the applications watching the server: fan-out to every open Watch stream.

On PostgreSQL the database announces every change (its triggers' notices, heard by the
server's store); the server passes them on. SQLite has no notices, so the server announces the
changes made through it (``announce``), which are all of them: it alone writes the file. The
notices are ``store.notices`` values here; ``Watch`` writes their text on the wire.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any, TypeAlias

from sagaway.store import notices
from sagaway.store.notices import READY, SCHEDULES_CHANGED, Ended, Notice

MAX_BACKLOG = 10_000
"""Notices one stream may hold unread; past that they are replaced by one ``Listening()``
(look again at everything), so a stuck client costs the server bounded memory."""

Queue: TypeAlias = asyncio.Queue[Notice | None]
"""A subscriber's notices; None ends its stream (the server is stopping)."""


class Hub:
    """The notices of one server, copied to each subscriber's queue."""

    def __init__(self, *, listening: bool) -> None:
        self._heard: dict[notices.Stream, bool] = {"": listening}
        """Whether the notices of each of the store's streams flow: "" all of them, or all
        but the ends once "ends" reports apart (PostgreSQL: its second listener)."""
        self._subscribers: set[Queue] = set()
        self._ready_pending: set[Queue] = set()

    def subscribe(self) -> Queue:
        queue: Queue = asyncio.Queue()
        self._subscribers.add(queue)
        return queue

    def unsubscribe(self, queue: Queue) -> None:
        self._subscribers.discard(queue)
        self._ready_pending.discard(queue)

    @property
    def listening(self) -> bool:
        """Whether every notice flows."""
        return all(self._heard.values())

    def taken(self, queue: Queue, notice: Notice) -> None:
        """``notice`` left ``queue``: a later ``Ready()`` is worth queueing again."""
        if notice == notices.READY:
            self._ready_pending.discard(queue)

    def publish(self, notice: Notice) -> None:
        """Queue ``notice`` for every subscriber (``Ready()`` at most once per queue: one look
        finds all the work that is due)."""
        if isinstance(notice, (notices.Listening, notices.Deaf)):
            self._heard[notice.stream] = isinstance(notice, notices.Listening)
        for queue in self._subscribers:
            if queue.qsize() >= MAX_BACKLOG:
                self._overflow(queue)
            if notice == notices.READY:
                if queue in self._ready_pending:
                    continue
                self._ready_pending.add(queue)
            queue.put_nowait(notice)

    def _overflow(self, queue: Queue) -> None:
        while not queue.empty():
            queue.get_nowait()
        self._ready_pending.discard(queue)
        queue.put_nowait(notices.Listening())  # what was dropped is found by looking again

    def close(self) -> None:
        """End every stream (the server is stopping)."""
        for queue in self._subscribers:
            queue.put_nowait(None)


# ----------------------------------------------------------------------------- announcements

Values = dict[str, Any]


def _ended(run_id: str, *, parent: bool = True) -> list[Notice]:
    # A top-level workflow's end makes nothing due: every application's recovery need not look.
    return [Ended(run_id), READY] if parent else [Ended(run_id)]


def _created(v: Values, result: Any) -> list[Notice]:
    if not result.created:
        return []
    replaced = [] if result.replaced_run_id is None else _ended(result.replaced_run_id)
    return replaced + ([] if v["lease"] is not None else [READY])


def _ready(v: Values, result: Any) -> list[Notice]:
    return [READY]


def _ready_if(changed: Callable[[Values, Any], Any]) -> Callable[[Values, Any], list[Notice]]:
    return lambda v, result: [READY] if changed(v, result) else []


ANNOUNCED: Mapping[str, Callable[[Values, Any], list[Notice]]] = {
    "CreateWorkflow": _created,
    "ForkWorkflow": _ready_if(lambda v, r: r is not None and r.created),
    "FinishWorkflow": lambda v, r: _ended(v["run_id"], parent=v["has_parent"]),
    "SuspendWorkflow": _ready,
    "ReleaseWorkflow": _ready,
    "WaitWorkflow": _ready,
    "ReleaseQueueSlot": _ready,
    "LeaveQueue": _ready,
    "EndWorkflow": lambda v, changed: _ended(v["run_id"]) if changed else [],
    "RequestCancel": lambda v, changed: (
        [notices.CancelRequested(v["run_id"]), READY] if changed else []
    ),
    "RetryNow": _ready_if(lambda v, changed: changed),
    "SendSignal": _ready_if(lambda v, r: r[1]),  # stored
    "WaitForChild": _ready_if(lambda v, r: v["wait"]),
    # it waits until a deadline: the recovery's next look may change
    "ReceiveSignal": _ready_if(lambda v, payload: payload is None and v["receive"].wait),
    "FireSchedule": _ready_if(lambda v, won: won and v["fire"].starts),  # the runs it created
    "PutSchedule": lambda v, r: [SCHEDULES_CHANGED],
    "SetSchedulePaused": lambda v, r: [SCHEDULES_CHANGED],
    "PauseWorkflow": _ready_if(lambda v, changed: changed and not v["paused"]),  # resumed
    "PauseCalls": _ready_if(lambda v, changed: changed and not v["paused"]),
    "Publish": lambda v, r: [notices.Published(v["publication"].step.run_id)],
}
"""The notices a call's change makes on SQLite, by RPC, from its arguments and result (on
PostgreSQL the database announces its changes itself)."""


def announce(hub: Hub, rpc: str, values: Values, result: Any) -> None:
    """Publish the notices of call ``rpc`` (on a store that does not announce its changes)."""
    rule = ANNOUNCED.get(rpc)
    if rule is not None:
        for notice in rule(values, result):
            hub.publish(notice)
