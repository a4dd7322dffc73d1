"""kill -9 of a worker in the middle of a durable agent run, then resume in another process:
no completed model request is sent again and no tool runs twice (counted from files)."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

import pytest

import sagaway as sw
from sagaway.agents import Approval
from tests.processes import script

APP = Path(__file__).with_name("agent_crash_app.py")


def _kill_when(db_url: str, mode: str, key: str, folder: Path, says: str) -> None:
    victim = script(
        APP,
        [db_url, mode, key, str(folder)],
        {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert victim.stdout is not None
    line = victim.stdout.readline()
    if line != f"{says}\n":
        victim.kill()
        raise AssertionError(victim.communicate(timeout=10)[1] or line)
    victim.send_signal(signal.SIGKILL)
    victim.communicate(timeout=10)
    assert victim.returncode == -signal.SIGKILL


@pytest.mark.slow
async def test_kill_mid_request_on_sqlite_then_resume(sqlite_url: str, tmp_path: Path) -> None:
    """The sample a plain run keeps; `pytest -m long` runs both kills on the four backends."""
    await _kill_and_resume(sqlite_url, tmp_path, "model", "IN_MODEL")


@pytest.mark.slow
@pytest.mark.long
@pytest.mark.parametrize(("mode", "says"), [("model", "IN_MODEL"), ("waiting", "WAITING")])
async def test_kill_mid_run_then_resume_sends_nothing_twice(
    db_url: str, tmp_path: Path, mode: str, says: str
) -> None:
    await _kill_and_resume(db_url, tmp_path, mode, says)


async def _kill_and_resume(db_url: str, tmp_path: Path, mode: str, says: str) -> None:
    _kill_when(db_url, mode, "trip-1", tmp_path, says)
    sys.path.insert(0, str(APP.parent))
    import agent_crash_app

    manager, agency, _ = agent_crash_app.make(db_url, tmp_path)
    async with manager:  # its Recovery Worker takes the run over once the dead lease expires
        handle = manager.get_workflow("trip-1")

        async def waiting() -> None:
            while True:
                if (await handle.status()) is sw.WorkflowStatus.WAITING:
                    return
                await asyncio.sleep(0.05)

        await asyncio.wait_for(waiting(), 30)
        await manager.signal("approval").send("trip-1", Approval(approved=True))
        assert await handle.result(timeout=30) == "Your trip to Porto is booked."
    requests = (tmp_path / "requests.txt").read_text().split()
    # Requests 0 and 1 were recorded before the kill: never sent again. Request 2 was in
    # flight (mode "model"): sent again, as nothing recorded its answer; in mode "waiting"
    # every request before the kill was recorded.
    expected = ["0", "1", "2", "2", "3"] if mode == "model" else ["0", "1", "2", "3"]
    assert requests == expected
    assert agency.lines() == ["book flight Porto", "book hotel Porto", "book car Porto"]
