"""kill -9 of the process compensating a cancelled saga: another process finishes the
compensations, each step is undone once, and the workflow ends CANCELLED."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import pytest

import sagaway as sw
from tests.processes import Script, script

APP = Path(__file__).with_name("cancel_app.py")


def _spawn(db_url: str, env: dict[str, str]) -> Script:
    return script(
        APP,
        [db_url, "order-9"],
        env,
    )


@pytest.mark.slow
async def test_cancelled_saga_killed_mid_compensation_is_compensated_once(
    db_url: str, tmp_path: Path
) -> None:
    ledger = tmp_path / "ledger.txt"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(sys.path),
        "LEDGER": str(ledger),
        "BLOCK_REFUND": "1",
    }
    victim = _spawn(db_url, env)
    assert victim.stdout is not None
    line = victim.stdout.readline()
    assert line == "COMPENSATING\n", victim.stderr.read() if victim.stderr else line
    victim.send_signal(signal.SIGKILL)
    victim.communicate(timeout=10)
    assert victim.returncode == -signal.SIGKILL
    assert ledger.read_text().splitlines() == ["reserve", "charge", "refund pay-order-9"]

    sys.path.insert(0, str(APP.parent))
    import cancel_app

    cancel_app.manager.url = db_url
    cancel_app.LEDGER = str(ledger)
    cancel_app.BLOCK_REFUND = False
    async with cancel_app.manager as manager:
        handle = manager.get_workflow("order-9")
        with pytest.raises(sw.WorkflowCancelled) as info:
            await handle.result(timeout=30)
        description = await handle.describe()
    assert "customer withdrew" in str(info.value)
    assert description.status is sw.WorkflowStatus.CANCELLED
    # The refund was under way when the process died: it runs again (at least once, with the
    # same idempotency key); the reservation is released exactly once, after it.
    assert ledger.read_text().splitlines() == [
        "reserve",
        "charge",
        "refund pay-order-9",
        "refund pay-order-9",
        "release res-order-9",
    ]


@pytest.mark.slow
async def test_a_cancel_accepted_during_the_last_step_survives_kill_9_mid_compensation(
    db_url: str, tmp_path: Path
) -> None:
    """The cancel is accepted while the saga's last activity runs; the block's end delivers it
    and the refund begins; kill -9 then. Another process replays the delivery at the same
    point and finishes the compensations (before the fix the workflow COMPLETED at once)."""
    ledger = tmp_path / "ledger.txt"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(sys.path),
        "LEDGER": str(ledger),
        "BLOCK_REFUND": "1",
        "MODE": "last",
    }
    victim = _spawn(db_url, env)
    assert victim.stdout is not None
    line = victim.stdout.readline()
    assert line == "COMPENSATING\n", victim.stderr.read() if victim.stderr else line
    victim.send_signal(signal.SIGKILL)
    victim.communicate(timeout=10)
    assert ledger.read_text().splitlines() == ["reserve", "charge", "refund pay-order-9"]

    sys.path.insert(0, str(APP.parent))
    import cancel_app

    cancel_app.manager.url = db_url
    cancel_app.LEDGER = str(ledger)
    cancel_app.BLOCK_REFUND = False
    cancel_app.LAST = True
    try:
        async with cancel_app.manager as manager:
            handle = manager.get_workflow("order-9")
            with pytest.raises(sw.WorkflowCancelled, match="customer withdrew"):
                await handle.result(timeout=30)
            description = await handle.describe()
    finally:
        cancel_app.LAST = False
    delivered = [s for s in description.steps if s.kind is sw.StepKind.CANCEL]
    assert [s.name for s in delivered] == ["saga end"]
    assert ledger.read_text().splitlines() == [
        "reserve",
        "charge",
        "refund pay-order-9",
        "refund pay-order-9",
        "release res-order-9",
    ]
