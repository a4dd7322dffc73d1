"""Shared fixtures: a fresh database per test on every backend.

PostgreSQL tests use ``SAGAWAY_TEST_POSTGRES_URL`` (default: the local server's ``test``
database). Outside CI they are skipped with the reason when no server answers; under
``CI=true`` an unreachable server fails them.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import logging
import os
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from tests.schema_dropper import SchemaDropper
    from tests.server_pool import ServerPool

# Tests start hundreds of processes that import Sagaway afresh (Engine Servers, workers, apps
# killed and restarted). Where the environment turns bytecode caching off, each of them would
# compile every module it imports again (~0.15 s per start here): let them write and reuse it.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

POSTGRES_URL = os.environ.get(
    "SAGAWAY_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
)
_pg_error: str | None = None
_dropper: SchemaDropper | None = None
_pg_checked = False


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--all-backends",
        action="store_true",
        default=False,
        help="also run tests/integration's grpc+postgres variants (left out otherwise: "
        "each is also run on postgres and on grpc+sqlite; SAGAWAY_TEST_ALL_BACKENDS=1 too)",
    )
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


def drop_schema(schema: str) -> None:
    """Drop ``schema`` behind the tests (tests/schema_dropper.py)."""
    global _dropper
    if _dropper is None:
        from tests.schema_dropper import SchemaDropper

        _dropper = SchemaDropper(POSTGRES_URL)
        atexit.register(_dropper.finish)  # should the session end without pytest_sessionfinish
    _dropper.drop(schema)


def _new_schema() -> tuple[str, Callable[[], None]]:
    """The URL of a schema no test has used (created on first connect) and its dropper."""
    schema = f"t_{uuid.uuid4().hex[:12]}"
    sep = "&" if "?" in POSTGRES_URL else "?"
    return f"{POSTGRES_URL}{sep}schema={schema}", functools.partial(drop_schema, schema)


def _fresh_postgres_url() -> Iterator[str]:
    require_postgres()
    url, drop = _new_schema()
    try:
        yield url
    finally:
        drop()


@pytest.fixture(
    params=[
        "sqlite",
        pytest.param("postgres", marks=pytest.mark.postgres),
        pytest.param("grpc+sqlite", marks=pytest.mark.grpc),
        # The fourth backend runs with the long suites (`pytest -m long`): a plain run stays
        # under 10 minutes on two cores, and CI runs both. In tests/integration it runs only
        # with --all-backends (pytest_collection_modifyitems).
        pytest.param(
            "grpc+postgres", marks=[pytest.mark.grpc, pytest.mark.postgres, pytest.mark.long]
        ),
    ]
)
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A URL of an empty database: a SQLite file in tmp_path, a fresh PostgreSQL schema, or
    a ``sagaway server`` process of its own in front of either (``grpc+…``; started while the
    tests before it run: tests/server_pool.py).

    A test that reads the database itself (SQL) is marked ``direct_db``: it runs on the first
    two only (``pytest_collection_modifyitems`` deselects its ``grpc+…`` variants)."""
    backend = request.param.removeprefix("grpc+")
    if backend != request.param:
        yield from _served(backend)
    elif backend == "sqlite":
        yield f"sqlite:///{tmp_path}/sagaway.db"
    else:
        yield from _fresh_postgres_url()


PREFETCH = 2
"""How many ``grpc+…`` tests ahead of the running one get their server started."""
_pool: ServerPool | None = None
_upcoming: dict[int, list[str]] = {}
"""By ``id(item)``: the backends behind the ``grpc+…`` tests from that item on."""


def _server_pool() -> ServerPool:
    global _pool
    if _pool is None:
        from tests.server_pool import ServerPool

        _pool = ServerPool(_new_schema)
        atexit.register(_pool.close)  # should the session end without pytest_sessionfinish
    return _pool


def _served(backend: str) -> Iterator[str]:
    with served(backend) as url:
        yield url


@contextlib.contextmanager
def served(backend: str, *, again: bool = False) -> Iterator[str]:
    """A started ``sagaway server`` of its own, in front of a fresh database of ``backend``.

    ``again``: the caller will want another one right after (start it now)."""
    from tests.grpc_server import SERVED

    if backend == "postgres":
        require_postgres()
    pool = _server_pool()
    fresh = pool.take(backend)
    if again:
        pool.prepare([backend])
    SERVED[fresh.server.url] = fresh.direct
    try:
        yield fresh.server.url
    finally:
        del SERVED[fresh.server.url]
        pool.release(fresh)


def _grpc_backend(item: pytest.Item) -> str | None:
    callspec = getattr(item, "callspec", None)
    param = str(callspec.params.get("db_url", "")) if callspec is not None else ""
    return param.removeprefix("grpc+") if param.startswith("grpc+") else None


def pytest_collection_finish(session: pytest.Session) -> None:
    _upcoming.clear()
    ahead: list[str] = []
    for item in reversed(session.items):
        backend = _grpc_backend(item)
        if backend is not None:
            ahead = [backend, *ahead[:PREFETCH]]
        _upcoming[id(item)] = ahead


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Start the servers of this test (if ``grpc+…``) and of the next ``grpc+…`` ones."""
    ahead = _upcoming.get(id(item), [])
    if "postgres" in ahead and _postgres_unavailable() is not None:
        ahead = [backend for backend in ahead if backend != "postgres"]
    if ahead:
        _server_pool().prepare(ahead)


@pytest.hookimpl(trylast=True)  # after pytest's own, which tears the last test's fixtures down
def pytest_sessionfinish(session: pytest.Session) -> None:
    if _pool is not None:
        _pool.close()
    if "tests.processes" in sys.modules:
        sys.modules["tests.processes"].close_zygote()
    if _dropper is not None:
        _dropper.finish()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Leave out the ``grpc+…`` variants of tests that read the database itself or check what
    only the SQL decides (``sql_only``), the ``long`` tests unless a marker expression was
    given (``pytest -m long`` runs them), and the ``grpc+postgres`` variants of
    tests/integration unless ``--all-backends`` is given (``_all_backends``)."""
    run_long = bool(config.getoption("markexpr"))
    every_backend = _all_backends(config)
    kept, dropped = [], []
    for item in items:
        callspec = getattr(item, "callspec", None)
        backend = str(callspec.params.get("db_url", "")) if callspec is not None else ""
        reads_db = backend.startswith("grpc+") and (
            item.get_closest_marker("direct_db") or item.get_closest_marker("sql_only")
        )
        served_pg = (
            backend == "grpc+postgres" and not every_backend and "integration" in item.path.parts
        )
        if reads_db or served_pg or (not run_long and item.get_closest_marker("long")):
            dropped.append(item)
        else:
            kept.append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


def _all_backends(config: pytest.Config) -> bool:
    """Whether tests/integration runs its ``grpc+postgres`` variants too. Each such test also
    runs on ``postgres`` (the store) and on ``grpc+sqlite`` (the server in front of a store);
    the pair adds little but a server process and a schema per test, some 600 of them, which
    took a third of the long suite. The acceptance tests (processes, kills) and the generative
    test keep all four backends."""
    flag = os.environ.get("SAGAWAY_TEST_ALL_BACKENDS", "").strip().lower()
    return bool(config.getoption("--all-backends")) or flag in {"1", "true", "yes"}


@pytest.fixture(autouse=True)
def _log_levels_as_found() -> Iterator[None]:
    """Leave the loggers' levels as the test found them: a level set by one test (the CLI's
    ``-v``, the generative driver's quiet engine log) must not change what a later test's
    ``caplog`` sees, whatever order the tests run in."""
    loggers = [logging.getLogger(), logging.getLogger("sagaway")]
    saved = [(log.level, log.disabled) for log in loggers]
    yield
    for log, (level, disabled) in zip(loggers, saved, strict=True):
        log.setLevel(level)
        log.disabled = disabled


@pytest.fixture
def postgres_url() -> Iterator[str]:
    """A fresh PostgreSQL schema, for behaviour only a server has (dropped connections)."""
    yield from _fresh_postgres_url()


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path}/sagaway.db"
