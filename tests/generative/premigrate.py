"""The next example's PostgreSQL schema, created and migrated on a thread while this one runs.

Each PostgreSQL example of the CI-size run gets a schema of its own, and its first process
used to migrate it (one transaction of every migration script: about 0.3 s on a busy machine,
mostly the server's work) before the program could start. Nothing the generative test checks
depends on who migrated the schema (``open`` is no fault target, and every later process of an
example finds the schema migrated anyway), so ``premigrating()`` has the next schema migrated
by a thread of its own while the current example runs. A migration that fails there is left
to the example's first process, as before (the migration is one transaction).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import uuid
from collections.abc import Callable, Iterator


class Premigrated:
    """Schemas migrated one ahead (``take``); ``close`` waits for the spare and drops it."""

    def __init__(self, base_url: str, drop: Callable[[str], None]) -> None:
        self._base_url = base_url
        self._drop = drop
        self._next: tuple[str, threading.Thread] | None = None

    def url(self, schema: str) -> str:
        sep = "&" if "?" in self._base_url else "?"
        return f"{self._base_url}{sep}schema={schema}"

    def take(self) -> str:
        """A migrated schema's name (the first one waits for its migration); the next starts."""
        if self._next is None:
            self._start()
        assert self._next is not None
        schema, thread = self._next
        thread.join()
        self._start()
        return schema

    def close(self) -> None:
        if self._next is not None:
            schema, thread = self._next
            self._next = None
            thread.join()
            self._drop(schema)

    def _start(self) -> None:
        schema = f"g_{uuid.uuid4().hex[:12]}"
        thread = threading.Thread(
            target=_migrate, args=(self.url(schema),), name=f"migrate {schema}", daemon=True
        )
        thread.start()
        self._next = (schema, thread)


def _migrate(url: str) -> None:
    import sagaway as sw

    async def connect() -> None:
        async with sw.Manager(url).connect():
            pass

    # Left to the example's first process should it fail here.
    with contextlib.suppress(Exception):
        asyncio.run(connect())


_active: Premigrated | None = None


def active() -> Premigrated | None:
    """The ``premigrating()`` in force, if any."""
    return _active


@contextlib.contextmanager
def premigrating(base_url: str, drop: Callable[[str], None]) -> Iterator[None]:
    """While in it, ``fresh_database`` gives PostgreSQL examples schemas migrated ahead."""
    global _active
    _active = Premigrated(base_url, drop)
    try:
        yield
    finally:
        spare, _active = _active, None
        spare.close()
