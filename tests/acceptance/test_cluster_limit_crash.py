"""A crashed slot holder's slot frees itself: two `sagaway worker` processes share a cluster-wide
queue of one slot; the process holding it is killed with SIGKILL mid-activity; the other
process's waiting workflow runs once the slot expires (lease_timeout, 2 s here: the holder
renewed it until it died), and the killed process's workflow is taken over and completes."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.long  # starts real processes: run by `pytest -m long`

ROOT = Path(__file__).resolve().parents[2]


def _worker(env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "sagaway", "worker", "tests.acceptance.limits_crash_app:manager"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


async def _until(check: object, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.05)


@pytest.mark.slow
async def test_a_killed_holders_slot_expires(db_url: str, tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    env = {
        **os.environ,
        "LIMITS_DB_URL": db_url,
        "LIMITS_MARKER": str(marker),
        "PYTHONPATH": os.pathsep.join([str(ROOT), *sys.path]),
    }
    sys.path.insert(0, str(ROOT))
    from tests.acceptance import limits_crash_app

    client = limits_crash_app.manager
    client.url = db_url
    async with client.connect():
        workers = [_worker(env) for _ in range(2)]
        try:
            first = await client.workflow(limits_crash_app.job, "first").execute()
            await _until(lambda: marker.exists() and marker.read_text(), 30)
            holder = next(w for w in workers if str(w.pid) == marker.read_text())
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
        finally:
            for w in workers:
                if w.poll() is None:
                    w.send_signal(signal.SIGTERM)
            for w in workers:
                w.communicate(timeout=60)
    assert results == ["first", "second"]
    runs = dict(line.split() for line in Path(f"{marker}.done").read_text().splitlines())
    assert set(runs) == {"first", "second"}
    assert all(float(at) > killed_at for at in runs.values())
