"""kill -9 of the process running a forked workflow: another process finishes the fork, and
the steps the fork kept (1-2) still ran once in all."""

from __future__ import annotations

import os
import signal
import sqlite3
import sys
from pathlib import Path

import pytest

from tests.processes import Script, script

pytestmark = pytest.mark.long  # starts real processes: run by `pytest -m long`

APP = Path(__file__).with_name("fork_app.py")


def _spawn(db_url: str, ledger: Path, mode: str) -> Script:
    return script(
        APP,
        [db_url, str(ledger), mode],
        {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )


def _finish(proc: Script) -> str:
    out, err = proc.communicate(timeout=90)
    assert proc.returncode == 0, err
    return out


@pytest.mark.slow
def test_fork_survives_kill_9_of_its_worker(db_url: str, tmp_path: Path) -> None:
    ledger = tmp_path / "ledger.db"
    assert _finish(_spawn(db_url, ledger, "source")) == "FAILED\n"

    victim = _spawn(db_url, ledger, "victim")
    rescue: Script | None = None
    try:
        assert victim.stdout is not None
        line = victim.stdout.readline()  # explicit synchronisation: step 3 runs in the victim
        assert line == "SHIPPING\n", victim.stderr.read() if victim.stderr else line
        victim.send_signal(signal.SIGKILL)
        victim.communicate(timeout=10)
        assert victim.returncode == -signal.SIGKILL
        rescue = _spawn(db_url, ledger, "rescue")
        out = _finish(rescue)
    finally:
        for proc in (victim, rescue):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.communicate(timeout=10)
    assert out == 'RESULT "shipped-paid-stock-7"\n'

    with sqlite3.connect(ledger) as conn:
        rows = conn.execute("SELECT activity, idem_key, executions FROM ledger").fetchall()
    by_activity: dict[str, list[tuple[str, int]]] = {}
    for activity, idem_key, executions in rows:
        by_activity.setdefault(activity, []).append((idem_key, executions))
    # Steps 1-2 ran once, in the source, across the three processes.
    assert by_activity["reserve"] == [("order-7/1", 1)]
    assert by_activity["charge"] == [("order-7/2", 1)]
    # Step 3: once in the source (the bug), then twice under the fork's one idempotency key
    # (the killed attempt and the one that completed).
    ship = dict(by_activity["ship"])
    assert ship.pop("order-7/3") == 1
    [(fork_key, executions)] = ship.items()
    assert fork_key.startswith("order-7-fixed@") and fork_key.endswith("/3")
    assert executions == 2
