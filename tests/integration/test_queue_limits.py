"""Cluster-wide activity queue limits (``Queue(scope="cluster")``) in one process, on every
backend: a workflow refused a slot holds no lease while it waits (WAITING, no owner, nothing
recorded), runs when the slot frees, and its attempt numbering is unaffected; a gather of
activities of a limited queue never runs more than the limit at once.

The slot is taken by a second store on the same database (another process, as far as the data
goes) and given back by the test: explicit synchronisation, no sleeps that pass by luck.
"""

from __future__ import annotations

import asyncio
import html
import re
import time
from typing import Any

import pytest
from click.testing import CliRunner
from starlette.testclient import TestClient

import sagaway as sw
from sagaway.cli.main import cli
from sagaway.console import ConsoleConfig, create_app
from sagaway.store import Store, open_store
from sagaway.store.records import QueueAdmission
from sagaway.testing.internals import store_of


def _manager(db_url: str, queue: sw.Queue) -> sw.Manager:
    return sw.Manager(db_url, poll_interval=0.05, queues={"q": queue})


async def _until(predicate: Any, timeout: float = 15.0) -> None:
    async def poll() -> None:
        while True:
            if await predicate():
                return
            await asyncio.sleep(0.02)

    await asyncio.wait_for(poll(), timeout)


async def test_a_workflow_waiting_for_a_slot_holds_no_lease(db_url: str) -> None:
    manager = _manager(db_url, sw.Queue(concurrency=1, scope="cluster"))
    attempts: list[int] = []

    @manager.register_activity(queue="q", retry=sw.RetryPolicy(initial_interval=0.01))
    async def charge() -> str:
        attempts.append(sw.activity_info().attempt)
        if len(attempts) == 1:
            raise sw.RetryableError("declined once")
        return "charged"

    @manager.register_workflow
    async def pay() -> str:
        return await charge()

    other: Store = open_store(db_url)
    await other.open()
    try:
        now = time.time()
        assert (
            await other.acquire_queue_slot(
                QueueAdmission(queue="q", holder="elsewhere", concurrency=1, rate_per_second=None),
                expires_at=now + 600,
                now=now,
            )
            is None
        )
        async with manager:
            handle = await manager.workflow(pay).execute(idempotency_key="pay-1")

            seen: list[sw.WorkflowStatus] = []

            async def parked() -> bool:
                # One read: between its polls for a slot the workflow is claimed again briefly.
                record = await other.get_workflow("pay-1")
                assert record is not None
                if record.status is not sw.WorkflowStatus.WAITING:
                    return False
                seen.append(record.status)
                assert record.lease_owner is None
                assert record.lease_expires_at is None
                assert record.next_run_at is not None
                assert await other.load_steps(record.run_id) == []  # the attempt never began
                return True

            await _until(parked)
            assert seen == [sw.WorkflowStatus.WAITING]
            assert attempts == []
            await other.release_queue_slot("q", holder="elsewhere", now=time.time())
            assert await handle.result(timeout=20) == "charged"
            [step] = (await handle.describe()).steps
    finally:
        await other.close()
    # The refusals did not count as attempts: the retry is attempt 2.
    assert attempts == [1, 2]
    assert step.attempts == 2


async def test_gathered_activities_stay_within_the_limit(db_url: str) -> None:
    manager = _manager(db_url, sw.Queue(concurrency=2, scope="cluster"))
    active = {"now": 0, "max": 0}

    @manager.register_activity(queue="q")
    async def work(i: int) -> int:
        active["now"] += 1
        active["max"] = max(active["max"], active["now"])
        await asyncio.sleep(0.05)
        active["now"] -= 1
        return i

    @manager.register_workflow
    async def fan_out(n: int) -> list[int]:
        return list(await asyncio.gather(*(work(i) for i in range(n))))

    async with manager:
        results = await asyncio.gather(
            *(manager.workflow(fan_out, 4).execute_get() for _ in range(3))
        )
    assert results == [[0, 1, 2, 3]] * 3
    assert active["max"] == 2


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"scope": "cluster"}, "needs a limit"),
        ({"concurrency": 0, "scope": "cluster"}, ">= 1"),
        ({"rate_per_second": 0.0, "scope": "cluster"}, "> 0"),
        ({"rate_per_second": float("inf"), "scope": "cluster"}, "finite"),
        ({"concurrency": 1, "scope": "world"}, "'process' or 'cluster'"),
    ],
)
def test_bad_limits_are_refused(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        sw.Queue(**kwargs)


async def test_a_deadline_ends_the_wait_for_a_start(db_url: str) -> None:
    manager = _manager(db_url, sw.Queue(rate_per_second=0.01, scope="cluster"))

    @manager.register_activity(queue="q")
    async def charge() -> str:
        return "charged"

    @manager.register_workflow
    async def pay() -> str:
        return await charge()

    other: Store = open_store(db_url)
    await other.open()
    try:
        now = time.time()
        # The queue's next start is 100 s away: wait_workflow wakes it at its deadline instead.
        once = QueueAdmission(queue="q", holder="elsewhere", concurrency=None, rate_per_second=0.01)
        admitted = await other.acquire_queue_slot(once, expires_at=now + 600, now=now)
        assert admitted is None
        async with manager:
            handle = await manager.workflow(pay).execute(deadline=1.0)
            with pytest.raises(sw.WorkflowCancelled):
                await handle.result(timeout=15)
    finally:
        await other.close()


async def test_a_saturated_queue_runs_the_higher_priority_call_first(db_url: str) -> None:
    """Concurrency 1, the slot held elsewhere: two calls of priority 1 wait in line, then one
    of a priority-4 workflow (its calls take its level), then one given priority 5 (which came
    last). When the slot frees, the calls run by priority, equal ones first in, first out."""
    manager = _manager(db_url, sw.Queue(concurrency=1, scope="cluster"))
    ran: list[str] = []

    @manager.register_activity(queue="q")
    async def charge(tag: str) -> None:
        ran.append(tag)

    @manager.register_workflow
    async def pay(tag: str, level: int | None) -> None:
        await manager.activity(charge, tag).execute_get(priority=level)

    other: Store = open_store(db_url)
    await other.open()
    slot = QueueAdmission(queue="q", holder="elsewhere", concurrency=1, rate_per_second=None)
    try:
        now = time.time()
        assert await other.acquire_queue_slot(slot, expires_at=now + 600, now=now) is None
        async with manager:
            handles = []
            for tag, level, start_level in [
                ("low-0", 1, None), ("low-1", 1, None), ("wf-4", None, 4), ("high", 5, None)
            ]:  # fmt: skip
                start = manager.workflow(pay, tag, level)
                handles.append(await start.execute(idempotency_key=tag, priority=start_level))

                async def in_line(key: str = tag) -> bool:
                    record = await other.get_workflow(key)
                    return record is not None and record.status is sw.WorkflowStatus.WAITING

                await _until(in_line)  # refused once at least: in line
            assert ran == []
            places = [(await h.describe()).queue_wait for h in handles]
            assert places == [("q", 1, 2), ("q", 1, 3), ("q", 4, 1), ("q", 5, 0)]
            shown = await asyncio.to_thread(
                CliRunner().invoke, cli, ["show", "low-1", "--db", db_url]
            )
            lines = [" ".join(line.split()) for line in shown.output.splitlines()]
            assert "queued waits for queue q, priority 1, 3 ahead" in lines, shown.output
            console_app = create_app(ConsoleConfig(url=db_url))
            with TestClient(console_app, base_url="http://127.0.0.1:8080") as ui:
                page = await asyncio.to_thread(ui.get, "/workflows/low-1")
            shown_in_console = " ".join(html.unescape(re.sub(r"<[^>]+>", " ", page.text)).split())
            assert "an activity call waits for queue q at priority 1: 3 ahead" in shown_in_console
            await other.release_queue_slot("q", holder="elsewhere", now=time.time())
            await asyncio.wait_for(asyncio.gather(*(h.result() for h in handles)), 30)
            assert [(await h.describe()).queue_wait for h in handles] == [None] * 4
    finally:
        await other.close()
    assert ran == ["high", "wf-4", "low-0", "low-1"]


@pytest.mark.parametrize("bad", [0, 6, 2.5, True, "5"])
async def test_an_activity_priority_out_of_range_is_refused(bad: Any, tmp_path: Any) -> None:
    manager = sw.Manager(f"sqlite:///{tmp_path}/bad.db", queues={"q": sw.Queue(concurrency=1)})
    with pytest.raises(ValueError, match="activity's priority must be an int from 1"):
        manager.register_activity(queue="q", priority=bad)

    @manager.register_activity
    async def charge() -> None: ...

    @manager.register_workflow
    async def pay() -> str:
        try:
            await manager.activity(charge).execute_get(priority=bad)
        except ValueError as exc:  # raised at the call, before anything is recorded
            return str(exc)
        return "called"

    async with manager:
        assert (
            "activity's priority must be an int from 1" in await manager.workflow(pay).execute_get()
        )


async def test_a_cancelled_call_leaves_the_line_while_its_workflow_cleans_up(db_url: str) -> None:
    """A priority-5 call waits first in line; its workflow is cancelled and runs a slow
    clean-up (still running). The slot frees: the priority-1 call behind it runs at once, not
    once the cancelled call's place lapses (lease_timeout, 30 s here)."""
    manager = _manager(db_url, sw.Queue(concurrency=1, scope="cluster"))
    cleaned = asyncio.Event()

    @manager.register_activity(queue="q")
    async def charge(tag: str) -> str:
        return tag

    @manager.register_activity
    async def clean_up() -> None:
        await cleaned.wait()

    @manager.register_workflow
    async def pay(tag: str, level: int) -> str:
        try:
            return await manager.activity(charge, tag).execute_get(priority=level)
        except sw.Cancelled:
            await clean_up()
            raise

    other: Store = open_store(db_url)
    await other.open()
    slot = QueueAdmission(queue="q", holder="elsewhere", concurrency=1, rate_per_second=None)
    try:
        now = time.time()
        assert await other.acquire_queue_slot(slot, expires_at=now + 600, now=now) is None
        async with manager:
            gone = await manager.workflow(pay, "gone", 5).execute(idempotency_key="gone")
            for handle in (gone, await manager.workflow(pay, "next", 1).execute()):

                async def in_line(h: Any = handle) -> bool:
                    return (await h.describe()).queue_wait is not None

                await _until(in_line)
            await gone.cancel()

            async def left() -> bool:
                return (await gone.describe()).queue_wait is None

            await _until(left)
            assert await gone.status() is sw.WorkflowStatus.RUNNING  # cleaning up
            await other.release_queue_slot("q", holder="elsewhere", now=time.time())
            assert await manager.get_workflow(handle.key).result(timeout=10) == "next"
            cleaned.set()
            with pytest.raises(sw.WorkflowCancelled):
                await gone.result(timeout=10)
    finally:
        await other.close()


async def test_an_admission_interrupted_after_its_commit_gives_its_slot_back(db_url: str) -> None:
    """A run is terminated while its call's admission has committed but its answer has not
    come back: the slot goes back at once, and the next call is admitted, not after the slot's
    expiry (lease_timeout: 600 s here)."""
    manager = sw.Manager(
        db_url,
        poll_interval=0.05,
        lease_timeout=600,
        queues={"q": sw.Queue(concurrency=1, scope="cluster")},
    )
    committed = asyncio.Event()

    @manager.register_activity(queue="q")
    async def charge(tag: str) -> str:
        return tag

    @manager.register_workflow
    async def pay(tag: str) -> str:
        return await charge(tag)

    async with manager:
        store = store_of(manager)
        acquire = store.acquire_queue_slot

        async def answer_lost(*args: Any, **kwargs: Any) -> float | None:
            retry_at = await acquire(*args, **kwargs)
            if not committed.is_set():
                committed.set()
                await asyncio.Event().wait()  # the answer never arrives
            return retry_at

        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(store, "acquire_queue_slot", answer_lost)
            stuck = await manager.workflow(pay, "stuck").execute(idempotency_key="stuck")
            await asyncio.wait_for(committed.wait(), 10)
            assert await manager.terminate("stuck")
            with pytest.raises(sw.WorkflowCancelled):
                await stuck.result(timeout=10)
            handle = await manager.workflow(pay, "next").execute(idempotency_key="next")
            assert await handle.result(timeout=10) == "next"


async def test_a_wait_for_a_slot_between_two_attempts_keeps_the_retry_round(db_url: str) -> None:
    """An activity that always fails with a retryable error, 3 attempts a round; before each
    retry its queue is full once, so the workflow is unloaded (WAITING) and replayed. The
    round goes on through the replays: 3 attempts, then SUSPENDED with RetriesExhausted (each
    replay used to begin a new round, so the run retried for ever)."""
    manager = _manager(db_url, sw.Queue(concurrency=1, scope="cluster"))
    attempts: list[int] = []

    @manager.register_activity(
        queue="q", retry=sw.RetryPolicy(initial_interval=0.01, maximum_attempts=3)
    )
    async def charge() -> str:
        attempts.append(sw.activity_info().attempt)
        raise sw.RetryableError("declined")

    @manager.register_workflow
    async def pay() -> str:
        return await charge()

    async with manager:
        store = store_of(manager)
        acquire = store.acquire_queue_slot
        refused_after: list[int] = []

        async def full_before_each_retry(
            admission: QueueAdmission, *, expires_at: float, now: float
        ) -> float | None:
            if attempts and len(attempts) not in refused_after:
                refused_after.append(len(attempts))
                return now  # refused: the workflow unloads, and asks again when replayed
            return await acquire(admission, expires_at=expires_at, now=now)

        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(store, "acquire_queue_slot", full_before_each_retry)
            handle = await manager.workflow(pay).execute(idempotency_key="pay-round")
            made: list[int] = []

            async def suspended() -> bool:
                if await handle.status() is not sw.WorkflowStatus.SUSPENDED:
                    return False
                made.extend(attempts)
                return True

            await _until(suspended)
        description = await handle.describe()
    assert made == [1, 2, 3]
    assert refused_after == [1, 2]
    assert "RetriesExhausted" in str(description.error)
