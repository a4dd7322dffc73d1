"""LISTEN/NOTIFY hands work and results between processes without waiting for a poll."""

from __future__ import annotations

import asyncio

import sagaway as sw

SLOW_POLL = 3600.0  # polling alone would take an hour: only notifications can be this fast


def _define(manager: sw.Manager, entered: asyncio.Event | None = None) -> None:
    @manager.register_activity(name="double")
    async def double(x: int) -> int:
        if entered is not None:
            entered.set()
            await asyncio.Event().wait()
        return 2 * x

    @manager.register_workflow(name="flow")
    async def flow(x: int) -> int:
        return await double(x)

    @manager.register_workflow(name="waiter")
    async def waiter() -> str:
        return str(await manager.signal("go").receive(str))


async def test_new_work_results_and_signals_cross_processes_by_notification(
    postgres_url: str,
) -> None:
    client = sw.Manager(postgres_url, poll_interval=SLOW_POLL)
    worker = sw.Manager(postgres_url, poll_interval=SLOW_POLL)
    _define(client)
    _define(worker)
    async with worker:
        # The worker has done its first scan and sleeps for an hour.
        await asyncio.sleep(0.2)
        async with client.connect():
            assert await client.workflow("flow", 21).execute_get(timeout=10) == 42
            handle = await client.workflow("waiter").execute()
            while await handle.status() is not sw.WorkflowStatus.WAITING:  # noqa: ASYNC110
                await asyncio.sleep(0.01)
            await client.signal("go").send(handle.key, "now")
            assert await handle.result(timeout=10) == "now"


async def test_cancel_from_another_process_stops_the_running_workflow(postgres_url: str) -> None:
    entered = asyncio.Event()
    client = sw.Manager(postgres_url, poll_interval=SLOW_POLL)
    worker = sw.Manager(postgres_url, poll_interval=SLOW_POLL, lease_timeout=3600)
    _define(client)
    _define(worker, entered)
    async with worker, client.connect():
        handle = await client.workflow("flow", 1).execute(idempotency_key="c1")
        await asyncio.wait_for(entered.wait(), 10)
        assert await client.get_workflow("c1").cancel()
        assert worker._worker is not None

        async def stopped() -> None:
            while worker._worker is not None and worker._worker.running_ids:  # noqa: ASYNC110
                await asyncio.sleep(0.01)

        # Without the notification the worker would notice at its next heartbeat, in 20 min.
        await asyncio.wait_for(stopped(), 10)
        assert await handle.status() is sw.WorkflowStatus.CANCELLED


async def test_starts_made_together_wake_listeners_once(postgres_url: str) -> None:
    """A batch of starts no process owns is one 'ready:' notice (PostgreSQL drops repeats of a
    transaction), not one per start: every listening process would otherwise wake per start."""
    from sagaway._engine.states import WorkflowStatus
    from sagaway.store import open_store
    from sagaway.store.records import Lease, NewWorkflow

    store = open_store(postgres_url)
    await store.open()
    notices: list[str] = []
    marker = asyncio.Event()

    def heard(payload: str) -> None:
        notices.append(payload)
        if payload.startswith("ended:"):
            marker.set()

    try:
        await store.listen(heard)
        starts = [
            NewWorkflow(run_id=f"r{i}", key=f"k{i}", name="flow", args="[1]", args_hash="h")
            for i in range(10)
        ]
        await asyncio.gather(
            *(
                store.create_workflow(s, now=1.0 + i / 100, lease=None, replace_live=False)
                for i, s in enumerate(starts)
            )
        )
        # A notice sent after all of them: once it is heard, every earlier one has been too.
        owned = Lease("t", "me", 99.0)
        await store.create_workflow(
            NewWorkflow(run_id="m", key="m", name="flow", args="[1]", args_hash="h"),
            now=2.0,
            lease=owned,
            replace_live=False,
        )
        await store.finish_workflow(
            "m", token="t", status=WorkflowStatus.COMPLETED, result="1", error=None, now=3.0
        )
        await asyncio.wait_for(marker.wait(), 10)
    finally:
        await store.close()
    ready = [n for n in notices if n.startswith("ready:")]
    # The first start found nothing under way and went alone; the nine made meanwhile went in
    # one statement, one transaction, one notice (not nine).
    assert ready == ["ready:", "ready:"]
