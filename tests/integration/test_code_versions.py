"""Code versions end to end on every backend (``db_url``): each execution records the version of
the process that created it (a start, a child, a fork), and a worker given ``run_versions`` runs
only executions of those versions: the blue/green deploy of docs/operating.md.

Which process ran an execution is told by its activity, which records the name of the Manager
it ran in. Nothing sleeps: results are awaited with deadlines.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import sagaway as sw

Ran = dict[str, str]


def _app(db_url: str, who: str, ran_by: Ran, **options: Any) -> sw.Manager:
    """A Manager named ``who`` with a workflow ``work(n)`` whose activity records where it ran,
    and a parent ``parent(n)`` that runs ``work(n)`` as a child."""
    options.setdefault("poll_interval", 0.05)
    m = sw.Manager(db_url, **options)

    @m.register_activity(name="where")
    async def where(key: str) -> str:
        ran_by[key] = who
        return who

    @m.register_workflow(name="work")
    async def work(key: str) -> str:
        return await where(key)

    @m.register_workflow(name="parent")
    async def parent(key: str) -> str:
        return await m.workflow("work", f"{key}-child").execute_get(idempotency_key=f"{key}-child")

    return m


async def _run(m: sw.Manager, key: str) -> str:
    return await m.workflow("work", key).execute_get(idempotency_key=key, timeout=20)  # type: ignore[no-any-return]


async def test_workers_run_only_their_code_versions(db_url: str) -> None:
    ran_by: Ran = {}
    # Each worker's own starts are of the other version: they must go through the database
    # to the other worker (Engine.start may not run them here).
    blue = _app(db_url, "blue", ran_by, version="v2", run_versions={"v1"})
    green = _app(db_url, "green", ran_by, version="v1", run_versions={"v2"})
    v1_client = _app(db_url, "v1-client", ran_by, version="v1")
    v2_client = _app(db_url, "v2-client", ran_by, version="v2")
    async with blue, green, v1_client.connect(), v2_client.connect():
        results = await asyncio.gather(
            *(_run(v1_client, f"c1-{n}") for n in range(3)),
            *(_run(v2_client, f"c2-{n}") for n in range(3)),
            *(_run(green, f"g-{n}") for n in range(3)),  # green creates v1
            *(_run(blue, f"b-{n}") for n in range(3)),  # blue creates v2
        )
        described = {
            key: (await v1_client.get_workflow(key).describe()).code_version
            for key in ("c1-0", "c2-0", "g-0", "b-0")
        }
    assert results == ["blue"] * 3 + ["green"] * 3 + ["blue"] * 3 + ["green"] * 3
    assert ran_by == {
        **{f"c1-{n}": "blue" for n in range(3)},
        **{f"g-{n}": "blue" for n in range(3)},
        **{f"c2-{n}": "green" for n in range(3)},
        **{f"b-{n}": "green" for n in range(3)},
    }
    assert described == {"c1-0": "v1", "c2-0": "v2", "g-0": "v1", "b-0": "v2"}


async def test_a_worker_without_run_versions_takes_every_version(db_url: str) -> None:
    ran_by: Ran = {}
    clients = [
        _app(db_url, f"client-{v}", ran_by, version=v) for v in ("v1", "v2", "2026.12.1")
    ] + [_app(db_url, "client-none", ran_by)]
    worker = _app(db_url, "any", ran_by)
    async with contextlib.AsyncExitStack() as stack:
        for c in clients:
            await stack.enter_async_context(c.connect())
        await stack.enter_async_context(worker)
        results = await asyncio.gather(*(_run(c, f"k-{i}") for i, c in enumerate(clients)))
        versions = [(await worker.get_workflow(f"k-{i}").describe()).code_version for i in range(4)]
    assert results == ["any"] * 4
    assert versions == ["v1", "v2", "2026.12.1", None]


async def test_unversioned_in_run_versions_takes_executions_without_a_version(
    db_url: str,
) -> None:
    ran_by: Ran = {}
    old = _app(db_url, "old", ran_by, run_versions={None})
    plain_client = _app(db_url, "plain", ran_by)
    v1_client = _app(db_url, "v1", ran_by, version="v1")
    async with plain_client.connect(), v1_client.connect():
        v1_handle = await v1_client.workflow("work", "k-v1").execute(idempotency_key="k-v1")
        plain_handle = await plain_client.workflow("work", "k-plain").execute(
            idempotency_key="k-plain"
        )
        async with old:
            assert await asyncio.wait_for(plain_handle.result(), 20) == "old"
            # Both were due at its first scan: a worker that ignored the filter took both.
            assert (await v1_handle.describe()).status is sw.WorkflowStatus.PENDING
        assert ran_by == {"k-plain": "old"}
        async with _app(db_url, "new", ran_by, run_versions={"v1"}):
            assert await asyncio.wait_for(v1_handle.result(), 20) == "new"


async def test_a_child_gets_the_version_of_the_process_that_starts_it(db_url: str) -> None:
    ran_by: Ran = {}
    client = _app(db_url, "client", ran_by, version="v1")
    worker = _app(db_url, "worker", ran_by, version="v1.1", run_versions={"v1", "v1.1"})
    async with worker, client.connect():
        result = await client.workflow("parent", "p").execute_get(idempotency_key="p", timeout=20)
        parent = await client.get_workflow("p").describe()
        child = await client.get_workflow("p-child").describe()
    assert result == "worker" and ran_by == {"p-child": "worker"}
    assert (parent.code_version, child.code_version) == ("v1", "v1.1")


async def test_a_fork_gets_the_version_of_the_process_that_forks(db_url: str) -> None:
    ran_by: Ran = {}
    v1 = _app(db_url, "v1", ran_by, version="v1", run_versions={"v1"})
    async with v1:
        assert await _run(v1, "src") == "v1"
    v2 = _app(db_url, "v2", ran_by, version="v2", run_versions={"v2"})
    async with v2:
        handle = await v2.fork("src", from_step=1, new_key="src-v2")
        assert await asyncio.wait_for(handle.result(), 20) == "v2"
        forked = await handle.describe()
    assert forked.code_version == "v2"


async def test_list_workflows_filters_by_code_version(db_url: str) -> None:
    ran_by: Ran = {}
    clients = {v: _app(db_url, str(v), ran_by, version=v) for v in ("v1", "v2", None)}
    async with clients["v1"].connect(), clients["v2"].connect(), clients[None].connect():
        for version, m in clients.items():
            for n in range(2):
                await m.workflow("work", "x").execute(idempotency_key=f"{version}-{n}")
        m = clients["v1"]
        v1 = await m.list_workflows(code_versions={"v1"})
        unversioned = await m.list_workflows(code_versions={None})
        both = await m.list_workflows(code_versions={"v2", None}, limit=3)
        every = await m.list_workflows(code_versions={"v2", None})
    assert sorted(d.key for d in v1) == ["v1-0", "v1-1"]
    assert {d.code_version for d in v1} == {"v1"}
    assert sorted(d.key for d in unversioned) == ["None-0", "None-1"]
    assert sorted(d.key for d in every) == ["None-0", "None-1", "v2-0", "v2-1"]
    # The newest three (each client stamps its starts with its own estimate of the database's
    # clock, so starts milliseconds apart from two clients may come in either order).
    assert [d.key for d in both] == [d.key for d in every[:3]]
