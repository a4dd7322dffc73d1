"""Priority and fairness through the public API, on every backend: options checked with clear
errors; a start given them waits PENDING for a claim (never run at once where it was started),
and one Manager's worker with one slot takes them higher level first, first in first out
within one, tenants in proportion to their weights; a child takes its parent's priority and
fairness key; ``describe()``, ``sagaway show`` and ``sagaway list`` show them, and a PENDING
start's place among the due starts."""

from __future__ import annotations

import asyncio
import json

import pytest
from click.testing import CliRunner, Result

import sagaway as sw
from sagaway.cli.main import cli


def _manager(db_url: str, order: list[str], concurrency: int = 1) -> sw.Manager:
    manager = sw.Manager(db_url, poll_interval=0.05, recovery_interval=0.2, concurrency=concurrency)

    @manager.register_activity
    async def work(name: str) -> str:
        order.append(name)
        return name

    @manager.register_workflow(name="job")
    async def job(name: str) -> str:
        return await work(name)

    @manager.register_workflow(name="parent")
    async def parent(name: str) -> str:
        handle = await manager.workflow(job, f"{name}-child").execute(idempotency_key=name + "/c")
        return await handle.result()

    return manager


async def _sagaway(*args: str) -> Result:
    return await asyncio.to_thread(CliRunner().invoke, cli, list(args))


async def test_misuse_is_refused_with_clear_errors(db_url: str) -> None:
    manager = _manager(db_url, [])
    async with manager.connect():
        call = manager.workflow("job", "x")
        with pytest.raises(ValueError, match=r"priority must be an int from 1 \(lowest\) to 5"):
            await call.execute(priority=7)
        with pytest.raises(ValueError, match="priority must be an int"):
            await call.execute(priority=2.5)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match=r"fairness_weight must be a number from 0\.001"):
            await call.execute(fairness_key="t", fairness_weight=0)
        with pytest.raises(ValueError, match="fairness_weight is the share of a fairness_key"):
            await call.execute(fairness_weight=2)
        with pytest.raises(ValueError, match="fairness_key"):
            await call.execute(fairness_key="")
        assert await manager.list_workflows() == []


async def test_a_worker_takes_starts_by_priority_then_in_order(db_url: str) -> None:
    order: list[str] = []
    manager = _manager(db_url, order)
    levels = [1, 3, 5, 3, 1, 5, 2, 4]
    async with manager.connect():  # no worker: every start waits
        for i, level in enumerate(levels):
            await manager.workflow("job", f"s{i}-p{level}").execute(
                idempotency_key=f"s{i}", priority=level
            )
        d = await manager.get_workflow("s7").describe()
        assert (d.status, d.priority, d.start_place) == (sw.WorkflowStatus.PENDING, 4, 2)
        shown = await _sagaway("show", "s7", "--db", db_url)
        assert shown.exit_code == 0, shown.output
        lines = [" ".join(line.split()) for line in shown.output.splitlines()]
        assert "priority 4 (1 lowest .. 5 highest)" in lines
        assert "queued waits for a free worker slot: 2 due start(s) go first" in lines
        listed = await _sagaway("list", "--db", db_url, "--json")
        assert {row["key"]: row["priority"] for row in json.loads(listed.output)}["s2"] == 5
    async with manager:
        for i in range(len(levels)):
            await manager.get_workflow(f"s{i}").result(timeout=30)
    assert order == [
        f"s{i}-p{levels[i]}" for i in sorted(range(len(levels)), key=lambda i: (-levels[i], i))
    ]


async def test_tenants_share_a_saturated_worker_by_weight(db_url: str) -> None:
    """Tenant "big" queues 30 starts, then "small" 5 and "gold" (weight 2) 10. While all three
    wait, each round takes one of big's, one of small's and two of gold's: small's 5 and gold's
    10 are all among the first 21 runs (within one: equal passes go either way), with 6 of
    big's."""
    order: list[str] = []
    manager = _manager(db_url, order)
    async with manager.connect():
        for tenant, count, weight in (("big", 30, 1.0), ("small", 5, 1.0), ("gold", 10, 2.0)):
            for i in range(count):
                await manager.workflow("job", f"{tenant}-{i:02d}").execute(
                    idempotency_key=f"{tenant}-{i:02d}",
                    fairness_key=tenant,
                    fairness_weight=weight,
                )
    async with manager:
        for key in ("big-29", "small-04", "gold-09"):
            await manager.get_workflow(key).result(timeout=60)
    small = [n for n, name in enumerate(order) if name.startswith("small")]
    gold = [n for n, name in enumerate(order) if name.startswith("gold")]
    assert max(small) < 22 and max(gold) < 22, order
    assert sum(1 for name in order[:21] if name.startswith("big")) <= 7, order
    for tenant in ("big", "small", "gold"):  # each tenant's own in order
        mine = [name for name in order if name.startswith(tenant)]
        assert mine == sorted(mine)


async def test_a_child_takes_its_parents_priority_and_key(db_url: str) -> None:
    manager = _manager(db_url, [], concurrency=4)
    async with manager:
        handle = await manager.workflow("parent", "p").execute(
            idempotency_key="p", priority=5, fairness_key="acme"
        )
        assert await handle.result(timeout=30) == "p-child"
        child = await manager.get_workflow("p/c").describe()
        assert (child.priority, child.fairness_key, child.fairness_weight) == (5, "acme", 1.0)
        plain = await manager.workflow("job", "plain").execute_get(idempotency_key="plain")
        assert plain == "plain"
        d = await manager.get_workflow("plain").describe()
        assert (d.priority, d.fairness_key, d.start_place) == (3, None, None)


async def test_a_registered_priority_is_the_default_of_starts(db_url: str) -> None:
    """``register_workflow(priority=)``: a start that gives none gets it (by function, by name,
    as a child, whose parent's level it beats); a start's own level wins."""
    manager = sw.Manager(db_url)

    @manager.register_workflow(priority=5)
    async def urgent() -> None: ...

    @manager.register_workflow
    async def parent() -> None:
        await manager.workflow(urgent).execute(idempotency_key="p/urgent")
        await manager.workflow(urgent).execute(idempotency_key="p/asked", priority=2)

    with pytest.raises(ValueError, match="registered workflow's priority must be an int from 1"):
        manager.register_workflow(priority=0)
    async with manager.connect():  # no worker: the starts wait, PENDING
        await manager.workflow(urgent).execute(idempotency_key="plain")
        await manager.workflow(urgent).execute(idempotency_key="asked", priority=1)
        await manager.start_by_name(
            manager.registry.workflow(urgent).name, idempotency_key="by-name"
        )
    async with manager:
        await manager.workflow(parent).execute_get(idempotency_key="p", priority=1)
        levels = {
            key: (await manager.get_workflow(key).describe()).priority
            for key in ("plain", "asked", "by-name", "p", "p/urgent", "p/asked")
        }
    assert levels == {
        "plain": 5, "asked": 1, "by-name": 5, "p": 1, "p/urgent": 5, "p/asked": 2
    }  # fmt: skip


async def test_a_codec_store_passes_them_through(db_url: str) -> None:
    manager = sw.Manager(db_url, codec=sw.codecs.Encrypt(keys=[sw.codecs.Encrypt.generate_key()]))

    @manager.register_workflow(name="job")
    async def job(name: str) -> str:
        return name

    async with manager.connect():
        await manager.workflow(job, "x").execute(
            idempotency_key="sealed", priority=2, fairness_key="acme", fairness_weight=0.5
        )
        d = await manager.get_workflow("sealed").describe()
        assert (d.priority, d.fairness_key, d.fairness_weight) == (2, "acme", 0.5)
        assert d.start_place == 0
