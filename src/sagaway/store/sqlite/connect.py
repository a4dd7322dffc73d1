"""The SQLite store's file: its URL, the connections it opens (the writer's, and the
checkpointer's), and the migration of its schema."""

from __future__ import annotations

import dataclasses
import sqlite3
import time
import urllib.parse
from pathlib import Path

from sagaway.store import migrations as _migrations
from sagaway.store.contract import DatabaseNotFound
from sagaway.store.sql import queries
from sagaway.store.sqlite.checkpoint import BACKSTOP_PAGES

_Q = queries("sqlite")
_CACHE_KIB = 16 * 1024
_SYNCHRONOUS = {"off", "normal", "full", "extra"}


def parse_sqlite_url(url: str) -> tuple[str, dict[str, str]]:
    """``sqlite:///relative.db``, ``sqlite:////abs/path.db``, ``sqlite:///:memory:`` + query."""
    parsed = urllib.parse.urlsplit(url)
    if parsed.scheme != "sqlite":
        raise ValueError(f"not a sqlite URL: {url!r}")
    path = parsed.path
    if path.startswith("/"):
        path = path[1:]  # sqlite:///x.db -> x.db ; sqlite:////abs -> /abs
    if not path:
        raise ValueError(f"sqlite URL without a file path: {url!r} (e.g. sqlite:///sagaway.db)")
    options = dict(urllib.parse.parse_qsl(parsed.query))
    return path, options


def is_file(path: str) -> bool:
    return path != ":memory:" and Path(path).is_file()


@dataclasses.dataclass(frozen=True)
class Connector:
    """How the store opens ``path`` (``create``: may create the file)."""

    url: str
    path: str
    create: bool
    synchronous: str
    busy_timeout_ms: int

    @classmethod
    def from_url(cls, url: str, *, create: bool) -> Connector:
        path, options = parse_sqlite_url(url)
        synchronous = options.pop("synchronous", "normal").lower()
        if synchronous not in _SYNCHRONOUS:
            raise ValueError(
                f"synchronous must be one of {sorted(_SYNCHRONOUS)}, not {synchronous!r}"
            )
        busy_timeout_ms = int(float(options.pop("busy_timeout", "30")) * 1000)
        if options:
            raise ValueError(f"unknown sqlite URL options: {sorted(options)}")
        return cls(url, path, create, synchronous, busy_timeout_ms)

    def writer(self) -> sqlite3.Connection:
        """The writer's connection: WAL mode, the store's pragmas, rows by column name."""
        if self.create:
            conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        else:  # mode=rw: fail rather than create the file if it vanished since open() looked
            conn = self.existing()
            if not _has_migrations_table(conn):  # before WAL mode writes to the file
                conn.close()
                raise DatabaseNotFound(self.url, "the file holds no Sagaway tables")
        conn.execute(f"PRAGMA busy_timeout = {self.busy_timeout_ms:d}")
        # Switching a new file to WAL takes an exclusive lock without waiting on busy_timeout:
        # processes that open one file at once retry here instead.
        deadline = time.monotonic() + self.busy_timeout_ms / 1000
        while True:
            try:
                conn.execute("PRAGMA journal_mode = WAL")
                break
            except sqlite3.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.01)
        conn.execute(f"PRAGMA synchronous = {self.synchronous}")
        conn.execute("PRAGMA foreign_keys = ON")
        # 16 MiB, not SQLite's 2 MiB: a long history's inner index pages stay cached for writes.
        conn.execute(f"PRAGMA cache_size = -{_CACHE_KIB:d}")
        # The checkpointer thread copies the WAL back; the writer does only past a backstop.
        conn.execute(f"PRAGMA wal_autocheckpoint = {BACKSTOP_PAGES:d}")
        conn.row_factory = sqlite3.Row  # rows are read by column name (see _rows)
        return conn

    def existing(self) -> sqlite3.Connection:
        """A read-write connection that never creates the file (mode=rw)."""
        uri = f"file:{urllib.parse.quote(str(Path(self.path).resolve()))}?mode=rw"
        return sqlite3.connect(uri, isolation_level=None, check_same_thread=False, uri=True)

    def checkpointer(self) -> sqlite3.Connection:
        conn = self.existing()
        conn.execute(f"PRAGMA busy_timeout = {self.busy_timeout_ms:d}")
        conn.execute(f"PRAGMA synchronous = {self.synchronous}")
        return conn

    def migrate(self, conn: sqlite3.Connection) -> None:
        conn.execute("BEGIN IMMEDIATE")  # serialises concurrent first starts across processes
        try:
            conn.execute(_Q["create_schema_migrations"])
            current = int(conn.execute(_Q["schema_version"]).fetchone()[0])
            for migration in _migrations.pending("sqlite", current, self.path):
                for statement in _migrations.statements(migration.sql):  # one at a time
                    conn.execute(statement)
                conn.execute(_Q["record_migration"], _migrations.record(migration))
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise


def _has_migrations_table(conn: sqlite3.Connection) -> bool:
    row = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'"
    ).fetchone()
    return row is not None
