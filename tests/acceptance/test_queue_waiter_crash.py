"""A crashed waiter does not block a cluster-wide queue: a priority-5 call waits in line for
the queue's one slot in a `sagaway worker` process that alone serves its workflow (task queue
"vip"); a priority-1 call waits behind it in another worker. The first is killed with SIGKILL
and the slot freed: the priority-1 call is refused while the dead waiter's place is live, and
runs once it lapses (lease_timeout after its last ask, 2 s here), instead of never."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sagaway.states import WorkflowStatus
from sagaway.store import open_store
from sagaway.store.records import QueueAdmission
from tests.store_helpers import raw_sql

pytestmark = pytest.mark.long  # starts real processes: run by `pytest -m long`

ROOT = Path(__file__).resolve().parents[2]


def _worker(env: dict[str, str], task_queue: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "sagaway", "worker", "tests.acceptance.waiter_crash_app:manager",
         "--task-queues", task_queue],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip


async def _until(check: object, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.05)


@pytest.mark.direct_db  # reads the line (queue_waiters) itself
async def test_a_killed_waiters_place_lapses(db_url: str) -> None:
    env = {
        **os.environ,
        "WAITER_DB_URL": db_url,
        "PYTHONPATH": os.pathsep.join([str(ROOT), *sys.path]),
    }
    sys.path.insert(0, str(ROOT))
    from tests.acceptance import waiter_crash_app as app

    client = app.manager
    client.url = db_url
    holder = QueueAdmission(queue="solo", holder="test", concurrency=1, rate_per_second=None)
    other = open_store(db_url)
    await other.open()
    try:
        now = time.time()
        assert await other.acquire_queue_slot(holder, expires_at=now + 600, now=now) is None
        async with client.connect():
            workers = {q: _worker(env, q) for q in ("vip", "default")}
            try:
                vip = await client.workflow(app.vip).execute(idempotency_key="vip")
                low = await client.workflow(app.low).execute(idempotency_key="low")
                in_line = "SELECT priority FROM queue_waiters ORDER BY priority"
                await _until(lambda: raw_sql(db_url, in_line) == [(1,), (5,)], 30)
                workers["vip"].send_signal(signal.SIGKILL)
                workers["vip"].wait(10)
                dead = "SELECT expires_at FROM queue_waiters WHERE priority = 5"
                [(lapses_at,)] = raw_sql(db_url, dead)
                freed_at = time.time()
                await other.release_queue_slot("solo", holder="test", now=freed_at)
                began = await asyncio.wait_for(low.result(), timeout=30)
                assert (await vip.status()) is WorkflowStatus.WAITING  # nobody serves it now
            finally:
                for w in workers.values():
                    if w.poll() is None:
                        w.send_signal(signal.SIGTERM)
                for w in workers.values():
                    w.communicate(timeout=60)
    finally:
        await other.close()
    # The dead waiter kept its place while it was live, then lost it: the queue went on.
    assert lapses_at > freed_at
    assert lapses_at - 0.2 <= began < lapses_at + 10
