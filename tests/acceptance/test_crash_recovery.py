"""kill -9 at every durable boundary, then recovery in a fresh process.

The saga (crash_app.py) writes every activity's effect to a ledger keyed by its idempotency key.
For each durable write of a full run (the start, each step, the end; before and after its commit)
a process is killed with SIGKILL exactly there, and a new process recovers the workflow. Every
run must end COMPLETED, or FAILED with its compensations done, and every effect must be in the
ledger exactly once.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import sys
from pathlib import Path

import pytest

from tests.processes import Script, script

APP = Path(__file__).with_name("crash_app.py")

# Durable writes of a full run. A step's outcome is written before the next durable action, and
# the last one together with the end: create + 3 steps + (4th step + finish). With the failing
# last step: create + 3 steps + the FAILED step + 2 compensations + (3rd compensation + finish).
SUCCESS_WRITES = 5
FAILURE_WRITES = 8

SAMPLE = {(2, "after"), (4, "before")}
"""Boundaries a plain ``pytest`` run kills at (a crash after a step's commit, and one before a
later commit); every other boundary is ``long`` (``pytest -m long``, which CI runs too)."""


def _boundaries(writes: int) -> list[object]:
    return [
        pytest.param(n, when, marks=[] if (n, when) in SAMPLE else [pytest.mark.long])
        for n in range(1, writes + 1)
        for when in ("before", "after")
    ]


EXPECTED = {
    "none": ["create_order", "reserve_stock", "charge_payment", "arrange_shipping"],
    "ship": [
        "create_order",
        "reserve_stock",
        "charge_payment",
        "refund_payment",
        "release_stock",
        "cancel_order",
    ],
}


def _spawn(db_url: str, ledger: Path, key: str, fail: str, crash: str) -> Script:
    return script(
        APP,
        [db_url, str(ledger), key, fail, crash],
        {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )


def _ledger(ledger: Path) -> list[tuple[str, str, int]]:
    with sqlite3.connect(ledger) as conn:
        return conn.execute(
            "SELECT idem_key, activity, executions FROM ledger ORDER BY rowid"
        ).fetchall()


def _run_case(
    db_url: str, tmp_path: Path, fail: str, crash: str
) -> tuple[dict[str, object], list[tuple[str, str, int]]]:
    ledger = tmp_path / "ledger.db"
    key = "order-1"
    victim = _spawn(db_url, ledger, key, fail, crash)
    recovery: Script | None = None
    try:
        assert victim.stdout is not None
        # Explicit synchronisation: the victim is parked at the boundary. After the last write
        # its own result may be printed first (the end is announced as soon as it commits).
        line = victim.stdout.readline()
        if line.startswith("RESULT"):
            line = victim.stdout.readline()
        assert line.startswith("BOUNDARY"), f"victim did not reach {crash}: {line!r}"
        victim.send_signal(signal.SIGKILL)
        victim.communicate(timeout=10)
        assert victim.returncode == -signal.SIGKILL
        recovery = _spawn(db_url, ledger, key, fail, "none")
        out, err = recovery.communicate(timeout=90)
        assert recovery.returncode == 0, err
    finally:
        for proc in (victim, recovery):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.communicate(timeout=10)
    result_line = [ln for ln in out.splitlines() if ln.startswith("RESULT ")]
    assert result_line, f"no result: {out!r} {err!r}"
    return json.loads(result_line[0][7:]), _ledger(ledger)


def _check(result: dict[str, object], rows: list[tuple[str, str, int]], fail: str) -> None:
    if fail == "none":
        assert result == {"completed": {"order": "order:order-1", "shipped": "shipped"}}
    else:
        assert result == {"failed": "NO_CARRIER"}
    activities = [activity for _, activity, _ in rows]
    # Exactly one ledger row per effect: an idempotency key that changed across processes
    # would show up here as a second row.
    assert sorted(activities) == sorted(EXPECTED[fail])
    if fail == "ship":
        compensations = [
            a for a in activities if a in ("refund_payment", "release_stock", "cancel_order")
        ]
        assert compensations == ["refund_payment", "release_stock", "cancel_order"]


@pytest.mark.slow
@pytest.mark.parametrize(("boundary", "when"), _boundaries(SUCCESS_WRITES))
def test_kill_at_every_boundary_of_a_completing_saga(
    db_url: str, tmp_path: Path, boundary: int, when: str
) -> None:
    result, rows = _run_case(db_url, tmp_path, "none", f"{boundary}:{when}")
    _check(result, rows, "none")


@pytest.mark.slow
@pytest.mark.parametrize(("boundary", "when"), _boundaries(FAILURE_WRITES))
def test_kill_at_every_boundary_of_a_compensating_saga(
    db_url: str, tmp_path: Path, boundary: int, when: str
) -> None:
    result, rows = _run_case(db_url, tmp_path, "ship", f"{boundary}:{when}")
    _check(result, rows, "ship")


def test_the_boundary_counts_match_a_full_run(db_url: str, tmp_path: Path) -> None:
    """Guards the parametrisation above: a crash point past the last write is never reached."""
    for fail, writes in (("none", SUCCESS_WRITES), ("ship", FAILURE_WRITES)):
        ledger = tmp_path / f"ledger-{fail}.db"
        proc = _spawn(db_url, ledger, f"count-{fail}", fail, f"{writes + 1}:before")
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        assert "BOUNDARY" not in out and "RESULT" in out
        proc = _spawn(
            db_url, tmp_path / f"ledger2-{fail}.db", f"count2-{fail}", fail, f"{writes}:after"
        )
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if line.startswith("RESULT"):
            line = proc.stdout.readline()
        assert line.startswith(f"BOUNDARY {writes} after")
        proc.kill()
        proc.communicate(timeout=10)
