"""Fixtures of the toolkit tests: a service database on SQLite or on a fresh PostgreSQL schema."""

from __future__ import annotations

import contextlib
import dataclasses
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sagaway.toolkit import localdb
from tests.conftest import POSTGRES_URL, require_postgres


@dataclasses.dataclass
class ServiceDB:
    """Where a test service keeps its tables; ``connect()`` opens a new connection each time."""

    dialect: localdb.Dialect
    sqlite_path: str | None = None
    schema: str | None = None
    opened: list[Any] = dataclasses.field(default_factory=list)

    @property
    def param(self) -> str:
        """Placeholder of the dialect, for the tests' own SQL."""
        return "?" if self.dialect is localdb.Dialect.SQLITE else "%s"

    @property
    def url(self) -> str:
        """A string a subprocess can reconnect with: a SQLite path or a PostgreSQL URL."""
        if self.dialect is localdb.Dialect.SQLITE:
            assert self.sqlite_path is not None
            return self.sqlite_path
        return f"{POSTGRES_URL}#{self.schema}"

    def connect(self) -> Any:
        conn = connect(self.url)
        self.opened.append(conn)
        return conn

    def close_all(self) -> None:
        for conn in self.opened:
            with contextlib.suppress(Exception):  # a thread's SQLite connection, or closed
                conn.close()


def connect(url: str) -> Any:
    """Connect to a ServiceDB url (used by subprocesses too)."""
    if "#" not in url:
        return localdb.connect_sqlite(url)
    import psycopg

    dsn, schema = url.split("#", 1)
    return psycopg.connect(dsn, options=f"-c search_path={schema}")


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def service_db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ServiceDB]:
    """An empty service database: a SQLite file in tmp_path, or a fresh PostgreSQL schema."""
    if request.param == "sqlite":
        db = ServiceDB(localdb.Dialect.SQLITE, sqlite_path=str(tmp_path / "service.db"))
        try:
            yield db
        finally:
            db.close_all()
        return
    require_postgres()
    import psycopg

    schema = f"svc_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(POSTGRES_URL, autocommit=True) as admin:
        admin.execute(f'CREATE SCHEMA "{schema}"')
    db = ServiceDB(localdb.Dialect.POSTGRES, schema=schema)
    try:
        yield db
    finally:
        db.close_all()
        with psycopg.connect(POSTGRES_URL, autocommit=True) as admin:
            admin.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
