"""Several worker processes share one database; one is killed with SIGKILL mid-run."""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

N = 500
ROOT = Path(__file__).resolve().parents[2]


def _worker(env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "sagaway", "worker", "tests.acceptance.scale_app:manager"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def _ledger_rows(ledger: Path) -> int:
    with sqlite3.connect(ledger, timeout=30) as conn:
        return int(conn.execute("SELECT COUNT(*) FROM ledger").fetchone()[0])


@pytest.mark.slow
@pytest.mark.long
async def test_three_workers_one_killed(db_url: str, tmp_path: Path) -> None:
    ledger = tmp_path / "ledger.db"
    env = {
        **os.environ,
        "SCALE_DB_URL": db_url,
        "SCALE_LEDGER": str(ledger),
        "PYTHONPATH": os.pathsep.join([str(ROOT), *sys.path]),
    }
    os.environ["SCALE_LEDGER"] = str(ledger)
    os.environ["SCALE_DB_URL"] = db_url
    sys.path.insert(0, str(ROOT))
    from tests.acceptance import scale_app

    scale_app.init_ledger(str(ledger))
    scale_app.LEDGER = str(ledger)
    client = scale_app.manager  # the fourth process's role: start and watch, no workers
    client.url = db_url  # the module may have been imported for another backend's run
    async with client.connect():
        workers = [_worker(env) for _ in range(3)]
        try:
            keys = [f"order-{i:04d}" for i in range(N)]
            handles = [
                await client.workflow(scale_app.order, key, i % 10 == 0).execute(
                    idempotency_key=key
                )
                for i, key in enumerate(keys)
            ]
            # Kill one worker once real progress is made (explicit condition, polled).
            while _ledger_rows(ledger) < N // 2:
                assert all(w.poll() is None for w in workers), "a worker died on its own"
                await asyncio.sleep(0.02)
            victim = workers[0]
            victim.send_signal(signal.SIGKILL)
            victim.wait(10)
            results = await asyncio.wait_for(
                asyncio.gather(*(h.result() for h in handles)), timeout=240
            )
            statuses = Counter([(await client.get_workflow(k).status()).value for k in keys])
        finally:
            for w in workers:
                if w.poll() is None:
                    w.send_signal(signal.SIGTERM)
            for w in workers:
                w.communicate(timeout=60)
    assert victim.returncode == -signal.SIGKILL
    assert all(w.returncode == 0 for w in workers[1:]), [w.returncode for w in workers]
    assert statuses == {"COMPLETED": N}
    expected = {k: ("compensated" if i % 10 == 0 else "completed") for i, k in enumerate(keys)}
    assert {r["key"]: r["status"] for r in results} == expected
    with sqlite3.connect(ledger) as conn:
        per_workflow = Counter(
            wf for (wf,) in conn.execute("SELECT workflow FROM ledger").fetchall()
        )
        activities = Counter(a for (a,) in conn.execute("SELECT activity FROM ledger"))
        overlaps = conn.execute("SELECT * FROM overlaps").fetchall()
    # Exactly one effect per step of every workflow: 4 on the happy path, 4 with compensation.
    assert set(per_workflow.values()) == {4} and len(per_workflow) == N
    assert activities["arrange_shipping"] == N - N // 10
    assert activities["release_stock"] == activities["cancel_order"] == N // 10
    assert overlaps == [], f"two live processes ran one workflow at once: {overlaps[:5]}"
