"""The console's one Manager, opened on first use and again after a failed open.

The console starts whether or not the database answers: a request that cannot reach it gets a
503 page, and the next request tries again. The Manager is opened with ``connect(create=False)``
semantics: it runs no Workers and creates no database. It audits every action made through
it, signals included (``audit="all"``).
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from contextlib import AbstractAsyncContextManager

import sagaway as sw
from sagaway import codecs
from sagaway.store import DatabaseNotFound

UNAVAILABLE: tuple[type[BaseException], ...] = (
    sw.EngineUnavailable,  # StoreUnavailable, or a client call that rode an outage out
    DatabaseNotFound,
    sqlite3.Error,
    OSError,
)
"""Errors that mean the database (or Engine Server) cannot be used now: a 503 page."""


class Backend:
    """Hands out the opened Manager of ``url``."""

    def __init__(self, url: str, codec: codecs.Chain | None = None) -> None:
        self.url = url
        self.codec = codec
        self._manager: sw.Manager | None = None
        self._context: AbstractAsyncContextManager[sw.Manager] | None = None
        self._lock = asyncio.Lock()

    async def manager(self) -> sw.Manager:
        """The open Manager; raises one of ``UNAVAILABLE`` when the database cannot be used."""
        if self._manager is not None:
            return self._manager
        async with self._lock:
            if self._manager is None:
                manager = sw.Manager(self.url, codec=self.codec, audit="all")
                context = manager.connect(create=False)
                await context.__aenter__()  # raises: nothing opened, the next request retries
                self._manager, self._context = manager, context
        return self._manager

    async def close(self) -> None:
        context, self._manager, self._context = self._context, None, None
        if context is not None:
            with contextlib.suppress(Exception):
                await context.__aexit__(None, None, None)
