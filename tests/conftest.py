"""Shared fixtures: a fresh database per test on every backend.

PostgreSQL tests use ``SAGAWAY_TEST_POSTGRES_URL`` (default: the local server's ``test``
database). Outside CI they are skipped with the reason when no server answers; under
``CI=true`` an unreachable server fails them.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

POSTGRES_URL = os.environ.get(
    "SAGAWAY_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
)
_pg_error: str | None = None
_pg_checked = False


def pytest_addoption(parser: pytest.Parser) -> None:
    # Options of tests/generative, declared here because only the root conftest's options are
    # known to pytest however the run is started.
    group = parser.getgroup("generative", "the generative engine test (tests/generative)")
    group.addoption(
        "--soak",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="run the generative test for this long, in batches of fresh seeds (0: off)",
    )
    group.addoption(
        "--gen-examples", type=int, default=None, help="programs per backend in the CI-size run"
    )
    group.addoption("--gen-seed", type=int, default=None, help="seed of the CI-size run")
    group.addoption(
        "--gen-enable",
        default="",
        help="generator switches to turn on (comma-separated; 'all'; '-name' turns one off)",
    )
    group.addoption(
        "--gen-replay", default=None, help="a failing scenario's JSON (or a file holding it)"
    )


def _postgres_unavailable() -> str | None:
    global _pg_checked, _pg_error
    if not _pg_checked:
        _pg_checked = True
        try:
            import psycopg

            with psycopg.connect(POSTGRES_URL, connect_timeout=3) as conn:
                conn.execute("SELECT 1")
        except Exception as exc:
            _pg_error = f"PostgreSQL at {POSTGRES_URL} unreachable: {exc}"
    return _pg_error


def require_postgres() -> None:
    """Skip (or, under CI=true, fail) when PostgreSQL is unreachable."""
    reason = _postgres_unavailable()
    if reason is None:
        return
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(reason + " (CI=true: PostgreSQL tests must run)")
    pytest.skip(reason)


def _drop_schema(schema: str) -> None:
    import psycopg

    with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def _fresh_postgres_url() -> Iterator[str]:
    require_postgres()
    schema = f"t_{uuid.uuid4().hex[:12]}"
    sep = "&" if "?" in POSTGRES_URL else "?"
    try:
        yield f"{POSTGRES_URL}{sep}schema={schema}"
    finally:
        _drop_schema(schema)


@pytest.fixture(
    params=[
        "sqlite",
        pytest.param("postgres", marks=pytest.mark.postgres),
        pytest.param("grpc+sqlite", marks=pytest.mark.grpc),
        pytest.param("grpc+postgres", marks=[pytest.mark.grpc, pytest.mark.postgres]),
    ]
)
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A URL of an empty database: a SQLite file in tmp_path, a fresh PostgreSQL schema, or
    an Engine Server (in a thread of this process) in front of either (``grpc+…``).

    A test that reads the database itself (SQL) is marked ``direct_db``: it runs on the first
    two only (``pytest_collection_modifyitems`` deselects its ``grpc+…`` variants)."""
    backend = request.param.removeprefix("grpc+")
    if backend == "sqlite":
        url = f"sqlite:///{tmp_path}/sagaway.db"
        if backend == request.param:
            yield url
            return
        yield from _served(url)
        return
    for url in _fresh_postgres_url():
        if backend == request.param:
            yield url
        else:
            yield from _served(url)


def _served(url: str) -> Iterator[str]:
    from tests.grpc_server import SERVED, ServerProcess

    with ServerProcess(url) as server:
        SERVED[server.url] = url
        try:
            yield server.url
        finally:
            del SERVED[server.url]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Leave out the ``grpc+…`` variants of tests that read the database itself."""
    kept, dropped = [], []
    for item in items:
        callspec = getattr(item, "callspec", None)
        backend = str(callspec.params.get("db_url", "")) if callspec is not None else ""
        if backend.startswith("grpc+") and item.get_closest_marker("direct_db") is not None:
            dropped.append(item)
        else:
            kept.append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


@pytest.fixture
def postgres_url() -> Iterator[str]:
    """A fresh PostgreSQL schema, for behaviour only a server has (dropped connections)."""
    yield from _fresh_postgres_url()


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path}/sagaway.db"
