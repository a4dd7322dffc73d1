"""Copying the SQLite WAL back into the database file, off the writer's thread.

In WAL mode every commit appends pages to the ``-wal`` file; a *checkpoint* copies them into the
database file (and syncs it) so the WAL can start over. Left to SQLite, the connection whose
commit pushes the WAL past 1,000 pages runs that checkpoint itself, inside the commit: every
write of the process waits behind it. On a large database the copied pages are scattered over a
file far bigger than any cache, and such a checkpoint takes hundreds of milliseconds.

Here a thread with its own connection checkpoints instead, in ``PASSIVE`` mode (it copies what
no reader still needs and never blocks the writer), at most every ``interval`` seconds while
there are writes. The writer keeps SQLite's automatic checkpoint only as a backstop, at a much
larger WAL, for when this thread cannot keep up.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Callable

__all__ = ["BACKSTOP_PAGES", "Checkpointer"]

logger = logging.getLogger(__name__)

BACKSTOP_PAGES = 20_000
"""The writer's own automatic checkpoint threshold (pages of WAL, ~80 MB at 4 KiB a page)."""

INTERVAL = 0.25
"""Seconds between two checkpoints while writes go on."""


class Checkpointer:
    """A daemon thread that checkpoints one SQLite file's WAL after writes."""

    def __init__(
        self,
        connect: Callable[[], sqlite3.Connection],
        path: str,
        *,
        interval: float = INTERVAL,
    ) -> None:
        self._connect = connect
        self._interval = interval
        self._enabled = path != ":memory:"  # an in-memory database has no WAL
        self._written = threading.Event()
        self._stopping = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name=f"sagaway-sqlite-checkpoint:{path}", daemon=True
        )
        self.checkpoints = 0
        """Checkpoints run so far (for tests and benchmarks)."""

    def written(self) -> None:
        """The writer committed changes: a checkpoint is worth running soon. The thread starts
        at the first call (a process that only reads has none). Called by the writer thread."""
        if self._thread.ident is None and self._enabled and not self._stopping.is_set():
            self._thread.start()
        self._written.set()

    def stop(self) -> None:
        """Stop the thread after the checkpoint it is running, if any (blocks until then)."""
        self._stopping.set()
        self._written.set()
        if self._thread.ident is not None:
            self._thread.join()

    def _run(self) -> None:
        try:
            conn = self._connect()
        except sqlite3.Error as exc:
            # The writer's own automatic checkpoint (the backstop) still keeps the WAL bounded.
            logger.warning("SQLite checkpointer not started: %s", exc)
            return
        try:
            while True:
                self._written.wait()
                if self._stopping.is_set():
                    return
                self._written.clear()
                self._checkpoint(conn)
                # Writes during the pause are gathered into the next checkpoint.
                if self._stopping.wait(self._interval):
                    return
        finally:
            conn.close()

    def _checkpoint(self, conn: sqlite3.Connection) -> None:
        try:
            conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        except sqlite3.Error as exc:  # busy or I/O trouble: the next write tries again
            logger.debug("SQLite checkpoint failed: %s", exc)
            return
        self.checkpoints += 1
