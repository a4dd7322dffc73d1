"""Long waits outlive processes: kill -9 a waiting workflow's process, or a running child's."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from typing import Any

import pytest

import sagaway as sw
from tests.processes import Script, script

pytestmark = pytest.mark.long  # starts real processes: run by `pytest -m long`

ROOT = Path(__file__).resolve().parents[2]
APP = Path(__file__).with_name("waiting_app.py")


def _spawn(db_url: str, mode: str, key: str, **env: str) -> Script:
    return script(
        APP,
        [db_url, mode, key],
        {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), **env},
    )


def _kill(proc: Script) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=10)
    assert proc.returncode == -signal.SIGKILL


def _kill_when_waiting(db_url: str, victim: Script) -> Any:
    """Kill ``victim`` once it says its workflows are WAITING; the app module, pointed at
    ``db_url``, for the process that takes over (this one)."""
    assert victim.stdout is not None
    line = victim.stdout.readline()
    assert line == "WAITING\n", victim.stderr.read() if victim.stderr else line
    _kill(victim)
    sys.path.insert(0, str(APP.parent))
    import waiting_app

    waiting_app.manager.url = db_url
    return waiting_app


@pytest.mark.slow
async def test_waiting_workflow_survives_kill_and_resumes_on_signal(db_url: str) -> None:
    waiting_app = _kill_when_waiting(db_url, _spawn(db_url, "wait", "kyc-7"))
    async with waiting_app.manager as manager:
        handle = manager.get_workflow("kyc-7")
        assert (await handle.describe()).status.value == "WAITING"
        await manager.signal("approval").send("kyc-7", waiting_app.Approval(ok=True))
        assert await handle.result(timeout=30) == "alice: approved"


@pytest.mark.slow
async def test_many_unloaded_workflows_of_a_killed_worker_resume_on_signals(db_url: str) -> None:
    """The killed process had run them all to WAITING and held none of them: another process
    resumes each by replaying its history when its signal comes."""
    waiting_app = _kill_when_waiting(db_url, _spawn(db_url, "many", "kyc", MANY="20"))
    async with waiting_app.manager as manager:
        counts = await manager.count_workflows()
        assert counts.get(sw.WorkflowStatus.WAITING) == 20, counts
        for i in range(20):
            assert await manager.signal("approval").send(
                f"kyc-{i}", waiting_app.Approval(ok=i % 2 == 0)
            )
        results = [await manager.get_workflow(f"kyc-{i}").result(timeout=30) for i in range(20)]
    assert results == [
        f"applicant-{i}: {'approved' if i % 2 == 0 else 'rejected'}" for i in range(20)
    ]


@pytest.mark.slow
async def test_killed_child_is_recovered_after_the_parent_answered(db_url: str) -> None:
    victim = _spawn(db_url, "parent", "line-9", BLOCK_CHILD="1")
    assert victim.stdout is not None
    first = victim.stdout.readline()
    second = victim.stdout.readline()
    # The parent's fire-and-forget start returned before the child finished.
    assert first == "PARENT_DONE accepted\n" and second == "CHILD_RUNNING\n", (first, second)
    _kill(victim)

    sys.path.insert(0, str(APP.parent))
    import waiting_app

    waiting_app.manager.url = db_url
    async with waiting_app.manager as manager:
        child = manager.get_workflow("line-9/1")
        assert (await child.describe()).parent_key == "line-9"
        assert await child.result(timeout=30) == "published 080-1"
        assert (await manager.get_workflow("line-9").status()).value == "COMPLETED"
