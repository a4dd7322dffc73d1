"""A crashed slot holder's slot frees itself: two `sagaway worker` processes share a cluster-wide
queue of one slot; the process holding it is killed with SIGKILL mid-activity; the other
process's waiting workflow runs once the slot expires (lease_timeout, 2 s here: the holder
renewed it until it died), and the killed process's workflow is taken over and completes."""

from __future__ import annotations

import asyncio
import signal
import time
from pathlib import Path

import pytest

from tests.processes import app_env, process_of, running, until, worker

pytestmark = pytest.mark.long  # starts real processes: run by `pytest -m long`


@pytest.mark.slow
async def test_a_killed_holders_slot_expires(db_url: str, tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    env = app_env(LIMITS_DB_URL=db_url, LIMITS_MARKER=str(marker))
    from tests.acceptance import limits_crash_app

    client = limits_crash_app.manager
    client.url = db_url
    app = "tests.acceptance.limits_crash_app:manager"
    async with client.connect():
        with running(worker(env, app), worker(env, app)) as workers:
            first = await client.workflow(limits_crash_app.job, "first").execute()
            await until(lambda: marker.exists() and marker.read_text(), 30)
            holder = process_of(workers, marker)
            second = await client.workflow(limits_crash_app.job, "second").execute()
            # The slot is held: the second waits (several of its polls) and does not run.
            await asyncio.sleep(1.0)
            assert not Path(f"{marker}.done").exists()
            assert (await second.status()).value in ("PENDING", "WAITING", "RUNNING")
            holder.send_signal(signal.SIGKILL)
            killed_at = time.time()
            holder.wait(10)
            results = await asyncio.wait_for(
                asyncio.gather(first.result(), second.result()), timeout=30
            )
    assert results == ["first", "second"]
    runs = dict(line.split() for line in Path(f"{marker}.done").read_text().splitlines())
    assert set(runs) == {"first", "second"}
    assert all(float(at) > killed_at for at in runs.values())
