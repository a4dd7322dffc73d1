"""The pool behind the ``grpc+…`` fixtures: one fresh server per test, nothing left behind."""

from __future__ import annotations

from pathlib import Path

import pytest

import sagaway as sw
from tests.server_pool import ServerPool

pytestmark = pytest.mark.slow


def _no_postgres() -> tuple[str, object]:
    raise AssertionError("no PostgreSQL server asked for")


async def test_each_take_is_its_own_server_on_its_own_empty_database() -> None:
    pool = ServerPool(_no_postgres)  # type: ignore[arg-type]
    try:
        pool.prepare(["sqlite", "sqlite", "sqlite"])  # one more than taken: close() kills it
        first, second = pool.take("sqlite"), pool.take("sqlite")
        assert first.direct != second.direct
        assert first.server.url != second.server.url
        async with sw.Manager(first.server.url).connect() as manager:
            await manager.start_by_name("anything", idempotency_key="k")
            assert sum((await manager.count_workflows()).values()) == 1
        async with sw.Manager(second.server.url).connect() as manager:
            assert await manager.count_workflows() == {}
        spare = [fresh.server for queue in pool._ready.values() for fresh in queue]
        assert len(spare) == 1
        pool.release(first)  # `second` is not given back: close() must still end it
    finally:
        pool.close()
    folders = [Path(f.direct.removeprefix("sqlite:///")).parent for f in (first, second)]
    assert not any(folder.exists() for folder in folders)
    for server in [first.server, second.server, *spare]:
        assert server.process is not None and server.process.poll() is not None
