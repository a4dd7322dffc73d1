"""Dropping the tests' PostgreSQL schemas behind the tests, and keeping the catalogs lean.

Each PostgreSQL test has a schema of its own (tests/conftest.py), dropped once the test is
done with it. A ``DROP SCHEMA … CASCADE`` of Sagaway's tables, functions and triggers takes
30-150 ms, which the next test need not wait for: nobody uses that schema again (its name is
random). So a thread of the test run drops them, in the order given, on a connection of its
own; ``finish()`` (at the session's end) waits until all are dropped.

Each schema also adds, then leaves dead, a few hundred rows in ``pg_attribute``,
``pg_depend``, ``pg_class`` and the like. Where autovacuum is off (as on the CI machine)
nothing reclaims them: the ``test`` database's catalogs grew past 1 GB over many runs, and
reading them got slower for every test. So the dropper also VACUUMs the catalogs that hold
many dead rows (a plain VACUUM: it stops no other session): once when it starts, then after
every ``VACUUM_AFTER`` drops.
"""

from __future__ import annotations

import logging
import queue
import threading
from typing import Any

VACUUM_AFTER = 200
"""Schemas dropped between two looks at the catalogs' dead rows."""
DEAD_ROWS = 20_000
"""Dead rows a catalog table may hold before the test run vacuums it."""
LOCK_TIMEOUT = "60s"
"""How long a drop waits for a lock a stuck test connection holds (then the schema stays)."""

_log = logging.getLogger(__name__)


def vacuum_catalogs(conn: Any) -> None:
    """VACUUM each system catalog with more than ``DEAD_ROWS`` dead rows (``conn``: a psycopg
    connection in autocommit mode); quietly nothing where the user may not."""
    import psycopg
    from psycopg import sql

    found = conn.execute(
        "SELECT relname FROM pg_stat_sys_tables"
        " WHERE schemaname = 'pg_catalog' AND n_dead_tup > %s",
        [DEAD_ROWS],
    ).fetchall()
    for (name,) in found:
        try:
            conn.execute(sql.SQL("VACUUM pg_catalog.{}").format(sql.Identifier(name)))
        except psycopg.Error:  # not the catalogs' owner: leave them
            return


class SchemaDropper:
    """Drops the schemas given to ``drop`` on a thread of its own (started on the first)."""

    def __init__(self, url: str) -> None:
        self._url = url
        self._queue: queue.SimpleQueue[str | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None

    def drop(self, schema: str) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="schema-dropper", daemon=True)
            self._thread.start()
        self._queue.put(schema)

    def finish(self) -> None:
        """Wait until every schema given is dropped."""
        if self._thread is not None:
            self._queue.put(None)
            self._thread.join()
            self._thread = None

    def _run(self) -> None:
        import psycopg

        dropped = 0
        conn: psycopg.Connection[Any] | None = None
        while (schema := self._queue.get()) is not None:
            try:
                if conn is None or conn.closed:
                    conn = psycopg.connect(self._url, autocommit=True)
                    conn.execute(f"SET lock_timeout = '{LOCK_TIMEOUT}'")
                    if dropped == 0:
                        vacuum_catalogs(conn)
                conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
                dropped += 1
                if dropped % VACUUM_AFTER == 0:
                    vacuum_catalogs(conn)
            except psycopg.Error as exc:
                _log.warning("test schema %s not dropped: %s", schema, exc)
                if conn is not None:
                    conn.close()
        if conn is not None:
            conn.close()
