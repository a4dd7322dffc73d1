"""Random identifiers and nonces without a system call each.

``uuid.uuid4()`` and ``os.urandom`` make one system call per value, and the call releases the
GIL: under load another thread (the SQLite store's writer, an activity) takes it and the caller
waits a whole switch interval to get it back. Run ids, lease tokens and nonces are needed
several times per workflow, so they are cut from a buffer of random bytes drawn from the
operating system 64 KiB at a time. A forked child drops the buffer it inherited: parent and
child must never hand out the same bytes.
"""

from __future__ import annotations

import os
import threading
import time

_BATCH = 65536


class RandomBytes:
    """Cryptographically random bytes from ``os.urandom``, drawn in batches; thread-safe."""

    def __init__(self, batch: int = _BATCH) -> None:
        self._batch = batch
        self._lock = threading.Lock()
        self._buffer = b""
        self._next = 0

    def take(self, n: int) -> bytes:
        """``n`` bytes nobody else in this process (or a forked one) is given."""
        with self._lock:
            if self._next + n > len(self._buffer):
                self._buffer, self._next = os.urandom(max(self._batch, n)), 0
            start = self._next
            self._next += n
            return self._buffer[start : start + n]

    def forget(self) -> None:
        """Drop the buffer (after a fork: the parent may hand out the same bytes)."""
        with self._lock:
            self._buffer, self._next = b"", 0


RANDOM = RandomBytes()
os.register_at_fork(after_in_child=RANDOM.forget)


def new_id() -> str:
    """A new random identifier: 128 random bits as 32 hex digits (like ``uuid4().hex``)."""
    return RANDOM.take(16).hex()


def new_run_id() -> str:
    """A new run id: 32 hex digits, the first 12 the time in milliseconds, the rest 80 random
    bits. Ids made one after the other sort together, so the indexes keyed by run id (of
    workflows, steps, signals) take a new one next to the last instead of on a random page:
    with a long history, random ids made every insert read and write a page of its own."""
    return f"{time.time_ns() // 1_000_000:012x}{RANDOM.take(10).hex()}"
