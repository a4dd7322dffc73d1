"""Wake-ups for the applications watching the server: fan-out to every open Watch stream.

On PostgreSQL the database announces every change (its triggers' notices, heard by the
server's store); the server passes them on. SQLite has no notices, so the server announces the
changes made through it (``announce``), which are all of them: it alone writes the file.
"""

from __future__ import annotations

import asyncio

MAX_BACKLOG = 10_000
"""Notices one stream may hold unread; past that they are replaced by one "listening:" (look
again at everything), so a stuck client costs the server bounded memory."""
_CLOSE = ""
"""Put on a subscriber's queue to end its stream (no notice is empty)."""


class Hub:
    """The notices of one server, copied to each subscriber's queue."""

    def __init__(self, *, listening: bool) -> None:
        self._heard = {"": listening}
        """Whether the notices of each of the store's streams flow: "" all of them, or all
        but the ends once "ends" reports apart (PostgreSQL: its second listener)."""
        self._subscribers: set[asyncio.Queue[str]] = set()
        self._ready_pending: set[asyncio.Queue[str]] = set()

    def subscribe(self) -> asyncio.Queue[str]:
        queue: asyncio.Queue[str] = asyncio.Queue()
        self._subscribers.add(queue)
        return queue

    def unsubscribe(self, queue: asyncio.Queue[str]) -> None:
        self._subscribers.discard(queue)
        self._ready_pending.discard(queue)

    @property
    def listening(self) -> bool:
        """Whether every notice flows."""
        return all(self._heard.values())

    def taken(self, queue: asyncio.Queue[str], payload: str) -> None:
        """``payload`` left ``queue``: a later "ready:" is worth queueing again."""
        if payload == "ready:":
            self._ready_pending.discard(queue)

    def publish(self, payload: str) -> None:
        """Queue ``payload`` for every subscriber ("ready:" at most once per queue: one look
        finds all the work that is due)."""
        kind, _, stream = payload.partition(":")
        if kind in ("listening", "deaf") and stream in ("", "ends"):
            self._heard[stream] = kind == "listening"
        for queue in self._subscribers:
            if queue.qsize() >= MAX_BACKLOG:
                self._overflow(queue)
            if payload == "ready:":
                if queue in self._ready_pending:
                    continue
                self._ready_pending.add(queue)
            queue.put_nowait(payload)

    def _overflow(self, queue: asyncio.Queue[str]) -> None:
        while not queue.empty():
            queue.get_nowait()
        self._ready_pending.discard(queue)
        queue.put_nowait("listening:")  # what was dropped is found by looking again

    def close(self) -> None:
        """End every stream (the server is stopping)."""
        for queue in self._subscribers:
            queue.put_nowait(_CLOSE)


def is_close(payload: str) -> bool:
    return payload == _CLOSE
