"""Engine Servers started ahead of the ``grpc+…`` tests that will use them.

Starting ``sagaway server`` takes about a second, most of it the interpreter importing; the
test using it often takes a tenth of that. So the servers are forked from a process that has
done the imports once (tests/server_zygote.py), and while one test runs, the servers of the
next ones are already starting, each in front of its own fresh database: a new
SQLite file or a new PostgreSQL schema, chosen when the server is spawned. Nothing is shared:
a server serves one test, then it is stopped and its database removed. Stopping is not
waited for either: the server gets SIGTERM at the test's teardown and is reaped (then its
database dropped) by a later call, or at the end of the session.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections import Counter, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from tests.grpc_server import ServerProcess
from tests.server_zygote import Zygote


@dataclass
class Fresh:
    """One server in front of one fresh database of ``backend``, until ``release``."""

    backend: str
    """``sqlite`` or ``postgres``."""
    direct: str
    """The database's own URL."""
    server: ServerProcess
    remove: Callable[[], None] = field(repr=False)
    """Removes the database once the server has exited."""


class ServerPool:
    """Spawns servers ahead (``prepare``), hands each out once (``take``), reaps them after.

    ``new_postgres()`` gives a fresh schema's URL and the function that drops it.
    """

    def __init__(self, new_postgres: Callable[[], tuple[str, Callable[[], None]]]) -> None:
        self._new_postgres = new_postgres
        self._ready: dict[str, deque[Fresh]] = {}
        self._stopping: list[Fresh] = []
        self._taken: list[Fresh] = []
        # SAGAWAY_TEST_FORK_SERVERS=0: start each with an interpreter of its own, as before
        # (to compare, or to rule the zygote out).
        forking = os.environ.get("SAGAWAY_TEST_FORK_SERVERS", "1") != "0"
        self._zygote = Zygote() if forking else None

    def prepare(self, backends: Iterable[str]) -> None:
        """Have a server spawned (or waiting) for each of ``backends`` (repeats count)."""
        for backend, wanted in Counter(backends).items():
            queue = self._ready.setdefault(backend, deque())
            while len(queue) < wanted:
                queue.append(self._spawn(backend))

    def take(self, backend: str) -> Fresh:
        """A started server in front of an empty database of ``backend``; for one test."""
        self._reap(block=False)
        queue = self._ready.get(backend)
        fresh = queue.popleft() if queue else self._spawn(backend)
        try:
            fresh.server.wait_ready()
        except BaseException:
            self._finish(fresh)
            raise
        self._taken.append(fresh)
        return fresh

    def release(self, fresh: Fresh) -> None:
        """Stop ``fresh``'s server (SIGTERM now; reaped and its database removed later)."""
        if fresh not in self._taken:  # close() came first (an interrupted session)
            return
        self._taken.remove(fresh)
        fresh.server.terminate()
        self._stopping.append(fresh)
        self._reap(block=False)

    def close(self) -> None:
        """Kill the servers nobody took (or gave back), wait for the stopping ones; remove every
        database."""
        unused = [fresh for queue in self._ready.values() for fresh in queue] + self._taken
        self._ready.clear()
        self._taken.clear()
        for fresh in unused:
            fresh.server.kill()
            self._finish(fresh)
        self._reap(block=True)
        if self._zygote is not None:
            self._zygote.close()

    def _spawn(self, backend: str) -> Fresh:
        if backend == "sqlite":
            folder = tempfile.mkdtemp(prefix="sagaway-pool-")
            url = f"sqlite:///{folder}/sagaway.db"

            def remove() -> None:
                shutil.rmtree(folder, ignore_errors=True)

        else:
            url, remove = self._new_postgres()
        # The shared fixtures' clients drive time (fake clocks, literal times): the server acts
        # at their `now`, and some ask for leases of hours or days (no heartbeat within the test).
        # Servers of their own (test_server_clock) act at the server's, with its default limit.
        server = ServerProcess(url, zygote=self._zygote, trust_client_clock=True, max_lease=1e9)
        try:
            server.spawn()
        except BaseException:
            server.__exit__()
            remove()
            raise
        return Fresh(backend, url, server, remove)

    def _reap(self, *, block: bool) -> None:
        still = []
        for fresh in self._stopping:
            process = fresh.server.process
            if block or process is None or process.poll() is not None:
                self._finish(fresh)
            else:
                still.append(fresh)
        self._stopping = still

    @staticmethod
    def _finish(fresh: Fresh) -> None:
        # stop() waits (SIGKILL after 30 s) and closes the pipe; only then is the database
        # free to drop.
        try:
            fresh.server.__exit__()
        finally:
            fresh.remove()
