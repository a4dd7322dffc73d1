"""The application of the upgrade test, run under the previous release or this one.

    python upgrade_app.py DB_URL DIR MODE

It uses only the API of Sagaway 0.1.0, so the same file runs on the old code (the release's
wheel first on PYTHONPATH) and on the new one. DIR holds the flag files the test creates and
the ledger (a SQLite file standing for the services' databases: one row per idempotency key,
with the number of times the effect was applied).

MODE (the code it is meant for in brackets):
  setup [old]      builds the database and leaves workflows COMPLETED, FAILED, SUSPENDED, WAITING
                   on a signal, on a timer and on a child, and one PENDING (started by a client
                   with no worker); prints ``STATES <json>``.
  old-worker [old] serves the task queue "old" only: starts ``held``, prints ``ENTERED`` once its
                   activity runs (it blocks until the flag ``release-held`` exists), then
                   ``RESULT held <json>``; then starts and ends one more workflow (``RESULT
                   old-after <json>``) and serves until its stdin closes.
  migrate [new]    prints ``READY``, waits for a line on stdin, prints ``OPENING``, opens the
                   store (which migrates it) and prints ``OPENED``.
  finish [new]     a worker for every queue: sends the signals, retries the suspended workflow
                   and prints ``RESULTS <json>``: each workflow's end.
  open [old]       opens the database as a client (a newer schema is refused: the error).
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import sys
from pathlib import Path
from typing import Any

import sagaway as sw

DB_URL, DIR, MODE = sys.argv[1], Path(sys.argv[2]), sys.argv[3]
LEDGER = DIR / "ledger.db"
TIMER_SECONDS = 3.0
"""Long enough to unload the workflow (WAITING) and to outlast the setup process."""

manager = sw.Manager(DB_URL, lease_timeout=5.0, poll_interval=0.1, recovery_interval=60.0)

WAITING = sw.WorkflowStatus.WAITING
ALL_KEYS = ["done", "failed", "suspended", "signal", "timer", "parent", "parent/1", "pending"]


class Declined(sw.CompletableError):
    """The payment was declined."""


def effect(name: str) -> str:
    """Apply an effect once per idempotency key; count every execution."""
    info = sw.activity_info()
    with sqlite3.connect(LEDGER, timeout=30) as conn:
        conn.execute(
            "INSERT INTO ledger (idem_key, workflow, activity, executions) VALUES (?, ?, ?, 1) "
            "ON CONFLICT (idem_key) DO UPDATE SET executions = executions + 1",
            (info.idempotency_key, info.workflow_key, name),
        )
    return f"{name}:{info.workflow_key}"


@manager.register_activity
async def reserve(key: str) -> str:
    return effect("reserve")


@manager.register_activity
async def charge(key: str, fail: bool) -> str:
    if fail:
        raise Declined("card declined", code="DECLINED")
    return effect("charge")


@manager.register_activity
async def release(reservation: str) -> None:
    effect("release")


@manager.register_activity(retry=sw.RetryPolicy(initial_interval=0.05, maximum_attempts=2))
async def flaky(key: str) -> str:
    if not (DIR / "fix-flaky").exists():
        raise sw.RetryableError("the service is down until fix-flaky exists")
    return effect("flaky")


@manager.register_activity
async def note(key: str) -> str:
    return effect("note")


@manager.register_activity
async def blocking(key: str) -> str:
    print("ENTERED", flush=True)
    # The test's go-ahead is a file another process creates: polled.
    while not (DIR / "release-held").exists():  # noqa: ASYNC110
        await asyncio.sleep(0.02)
    return effect("blocking")


@manager.register_workflow
async def order(key: str, fail: bool) -> list[str]:
    async with sw.Saga() as saga:
        reservation = await reserve(key)
        saga.add_compensation(release, reservation)
        charged = await charge(key, fail)
    return [reservation, charged]


@manager.register_workflow
async def repaired(key: str) -> str:
    return await flaky(key)


@manager.register_workflow
async def approval(key: str) -> str:
    answer = await manager.signal("approval").receive(str)
    return f"{answer}+{await note(key)}"


@manager.register_workflow
async def parent(key: str) -> str:
    child = await manager.workflow(approval, f"{key}-child").execute_get()
    return f"parent({child})"


@manager.register_workflow(task_queue="timers")
async def timer(key: str) -> str:
    await manager.sleep(TIMER_SECONDS)
    return await note(key)


@manager.register_workflow(task_queue="later")
async def later(key: str) -> str:
    return await note(key)


@manager.register_workflow(task_queue="old")
async def held(key: str) -> str:
    return await blocking(key)


async def reach(key: str, status: sw.WorkflowStatus) -> None:
    """Poll the database (the engine's worker commits the state, not this code)."""
    handle = manager.get_workflow(key)
    for _ in range(1500):
        if await handle.status() is status:
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"{key} never became {status}: {await handle.status()}")


async def setup() -> None:
    manager.task_queues = frozenset({"default", "timers"})
    async with manager:
        await manager.workflow(order, "done", False).execute_get(idempotency_key="done")
        failed = await manager.workflow(order, "failed", True).execute(idempotency_key="failed")
        try:
            await failed.result(timeout=30)
        except Declined:
            pass
        else:
            raise AssertionError("the declined order completed")
        await manager.workflow(repaired, "suspended").execute(idempotency_key="suspended")
        await manager.workflow(approval, "signal").execute(idempotency_key="signal")
        await manager.workflow(parent, "parent").execute(idempotency_key="parent")
        for key in ("suspended", "signal", "parent", "parent/1"):
            await reach(key, sw.WorkflowStatus.SUSPENDED if key == "suspended" else WAITING)
        # Last, and then at once out: no process of the setup is left to fire the timer.
        await manager.workflow(timer, "timer").execute(idempotency_key="timer")
        await reach("timer", WAITING)
    async with manager.connect():  # a client: no worker serves any queue
        await manager.workflow(later, "pending").execute(idempotency_key="pending")
        states = {key: (await manager.get_workflow(key).status()).value for key in ALL_KEYS}
    print("STATES " + json.dumps(states), flush=True)


async def old_worker() -> None:
    manager.task_queues = frozenset({"old"})
    async with manager:
        result = await manager.workflow(held, "held").execute_get(idempotency_key="held")
        print("RESULT held " + json.dumps(result), flush=True)
        after = await manager.workflow(order, "old-after", False).execute(
            idempotency_key="old-after"
        )
        # The "default" queue is not served here: this process starts it, a new worker runs it.
        print("STARTED old-after " + after.key, flush=True)
        await asyncio.to_thread(sys.stdin.read)  # serve until the test closes stdin


async def migrate() -> None:
    from sagaway.store import open_store

    print("READY", flush=True)
    await asyncio.to_thread(sys.stdin.readline)
    print("OPENING", flush=True)
    store = open_store(DB_URL)
    await store.open()
    await store.close()
    print("OPENED", flush=True)


async def finish() -> None:
    async with manager:
        await manager.signal("approval").send("signal", "yes")
        await manager.signal("approval").send("parent/1", "ok")
        assert await manager.retry("suspended")
        results: dict[str, Any] = {}
        for key in [*ALL_KEYS, "held", "old-after"]:
            try:
                results[key] = await manager.get_workflow(key).result(timeout=30)
            except Declined as exc:
                results[key] = {"failed": exc.code}
        print("RESULTS " + json.dumps(results), flush=True)


async def open_only() -> None:
    async with manager.connect(create=False):
        print("OPENED", flush=True)


def main() -> None:
    with sqlite3.connect(LEDGER, timeout=30) as conn:
        conn.execute(
            "CREATE TABLE IF NOT EXISTS ledger (idem_key TEXT PRIMARY KEY, workflow TEXT, "
            "activity TEXT, executions INTEGER)"
        )
    print(f"CODE {sw.__file__}", flush=True)
    modes = {
        "setup": setup,
        "old-worker": old_worker,
        "migrate": migrate,
        "finish": finish,
        "open": open_only,
    }
    asyncio.run(modes[MODE]())


if __name__ == "__main__":
    main()
