"""kill -9 while talking to running workflows: an update accepted but not answered is answered
once after recovery, its effect applied once; a paused workflow stays paused across the death
of its worker, and runs on when resumed."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from typing import Any

import pytest

import sagaway as sw
from tests.processes import script

pytestmark = pytest.mark.long  # starts real processes: run by `pytest -m long`

APP = Path(__file__).with_name("talk_app.py")


def _killed_after(db_url: str, mode: str, ledger: Path, lines: list[str]) -> Any:
    """Run the app in ``mode``, kill -9 it once it printed ``lines``; the app module, pointed
    at ``db_url``, for the process that takes over (this one)."""
    victim = script(
        APP,
        [db_url, mode],
        {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "LEDGER": str(ledger)},
    )
    assert victim.stdout is not None
    seen = sorted(victim.stdout.readline() for _ in lines)
    if seen != sorted(f"{line}\n" for line in lines):
        victim.kill()
        raise AssertionError(f"{seen}: {victim.communicate(timeout=10)[1]}")
    victim.send_signal(signal.SIGKILL)
    victim.communicate(timeout=10)
    assert victim.returncode == -signal.SIGKILL
    sys.path.insert(0, str(APP.parent))
    import talk_app

    talk_app.manager.url = db_url
    talk_app.LEDGER = str(ledger)
    talk_app.BLOCK = False
    return talk_app


@pytest.mark.slow
async def test_update_killed_between_acceptance_and_answer_is_answered_once(
    db_url: str, tmp_path: Path
) -> None:
    ledger = tmp_path / "ledger.txt"
    app = _killed_after(db_url, "update", ledger, ["HANDLING"])
    assert ledger.read_text().splitlines() == ["apply ann", "notify ann"]
    async with app.manager as manager:
        handle = manager.get_workflow("approvals")
        # The caller died with the process; asked again with the same id, the recovered
        # workflow answers it once.
        answer = await handle.update("approve", "ann", update_id="u-1", timeout=30)
        assert answer.result == "approved by ann"
        assert await handle.result(timeout=30) == "approved by ann"
        again = await handle.update("approve", "ann", update_id="u-1", timeout=30)
        assert again.result == "approved by ann"
        steps = (await handle.describe()).steps
    # The recorded approval is not applied again; the notification in flight ran again.
    assert ledger.read_text().splitlines() == ["apply ann", "notify ann", "notify ann"]
    answers = [s for s in steps if s.kind is sw.StepKind.UPDATE]
    assert [(s.name, s.status) for s in answers] == [("approve:u-1", sw.StepStatus.COMPLETED)]


@pytest.mark.slow
async def test_pause_survives_kill_9_of_its_worker_and_resume_continues(
    db_url: str, tmp_path: Path
) -> None:
    ledger = tmp_path / "ledger.txt"
    app = _killed_after(db_url, "pause", ledger, ["RUNNING", "RUNNING", "PAUSED"])
    assert sorted(ledger.read_text().splitlines()) == ["step p1", "step w1"]
    async with app.manager as manager:
        paused, witness = manager.get_workflow("paused"), manager.get_workflow("witness")
        # Both leases lapse together; the Recovery Worker takes the witness over and runs it
        # to its end, and leaves the paused one alone.
        assert await witness.result(timeout=30) == ["w1", "w2"]
        described = await paused.describe()
        # Still paused, and not taken over: its first step did not run again (the dead
        # process's lease, lapsed, is all the row still names).
        assert described.paused and described.status is sw.WorkflowStatus.RUNNING
        assert sorted(ledger.read_text().splitlines()) == [
            "step p1",
            "step w1",
            "step w1",
            "step w2",
        ]
        assert await manager.resume("paused")
        assert await paused.result(timeout=30) == ["p1", "p2"]
    lines = ledger.read_text().splitlines()
    assert lines.count("step p1") == 2 and lines.count("step p2") == 1
