"""Fixtures of the Store contract tests: ``store`` opens the store on each backend's fresh
database (``db_url``), ``other`` opens a second one on the same database."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from sagaway.store import Store, open_store
from tests.conftest import POSTGRES_URL, _new_schema, require_postgres
from tests.pgbouncer import POOLER_PARAM, running_pgbouncer


@pytest.fixture
async def store(db_url: str) -> AsyncIterator[Store]:
    s = open_store(db_url)
    await s.open()
    try:
        yield s
    finally:
        await s.close()


@pytest.fixture
async def other(db_url: str, store: Store) -> AsyncIterator[Store]:
    """A second store on the same database (another process, as far as the data goes)."""
    s = open_store(db_url)
    await s.open()
    try:
        yield s
    finally:
        await s.close()


@pytest.fixture(scope="session")
def pgbouncer() -> Iterator[str]:
    """A PgBouncer in transaction pooling mode in front of the test server, for the session:
    the plain libpq URL of the test database through it (``tests/pgbouncer.py``)."""
    require_postgres()
    with running_pgbouncer(POSTGRES_URL) as url:
        yield url


@pytest.fixture
def pgbouncer_url(pgbouncer: str) -> Iterator[str]:
    """A Sagaway URL of a fresh schema through PgBouncer (``pooler=transaction``)."""
    url, drop = _new_schema()
    schema = url.rpartition("schema=")[2]
    try:
        yield f"{pgbouncer}?schema={schema}&{POOLER_PARAM}"
    finally:
        drop()
