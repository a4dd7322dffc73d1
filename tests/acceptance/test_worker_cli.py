"""`sagaway worker`: graceful shutdown drains running work, or releases it for another worker."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

pytestmark = pytest.mark.long  # starts real processes: run by `pytest -m long`

ROOT = Path(__file__).resolve().parents[2]


def _worker(env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "sagaway", "worker", "tests.acceptance.worker_app:manager", *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


async def _until(path: Path) -> None:
    async def poll() -> None:
        while not path.exists():  # noqa: ASYNC110 - written by another process
            await asyncio.sleep(0.01)

    await asyncio.wait_for(poll(), 30)


@pytest.fixture
def app(db_url: str, tmp_path: Path) -> tuple[dict[str, str], object]:
    env = {
        **os.environ,
        "WORKER_DB_URL": db_url,
        "WORKER_DIR": str(tmp_path),
        "PYTHONPATH": os.pathsep.join([str(ROOT), *sys.path]),
    }
    os.environ["WORKER_DB_URL"] = db_url
    os.environ["WORKER_DIR"] = str(tmp_path)
    sys.path.insert(0, str(ROOT))
    from tests.acceptance import worker_app

    worker_app.manager.url = db_url
    worker_app.DIR = tmp_path
    return env, worker_app


@pytest.mark.slow
async def test_sigterm_drains_a_running_workflow(
    app: tuple[dict[str, str], object], tmp_path: Path
) -> None:
    env, worker_app = app
    manager = worker_app.manager  # type: ignore[attr-defined]
    proc = _worker(env, "--drain", "30")
    async with manager.connect():
        handle = await manager.workflow("gated_flow", "a").execute(idempotency_key="a")
        await _until(tmp_path / "entered-a")
        proc.send_signal(signal.SIGTERM)
        (tmp_path / "open-a").touch()  # the running activity may finish during the drain
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        assert "draining" in err
        assert await handle.result(timeout=10) == f"done by {proc.pid}"


@pytest.mark.slow
async def test_release_lets_another_worker_take_over_at_once(
    app: tuple[dict[str, str], object], tmp_path: Path
) -> None:
    env, worker_app = app
    manager = worker_app.manager  # type: ignore[attr-defined]
    first = _worker(env, "--drain", "0.2")
    async with manager.connect():
        handle = await manager.workflow("gated_flow", "b").execute(idempotency_key="b")
        await _until(tmp_path / "entered-b")
        first.send_signal(signal.SIGTERM)
        first.communicate(timeout=60)
        assert first.returncode == 0
        (tmp_path / "entered-b").unlink()
        # The lease was released: a second worker takes the workflow now, not after 120 s.
        second = _worker(env)
        try:
            await _until(tmp_path / "entered-b")
            (tmp_path / "open-b").touch()
            assert await handle.result(timeout=30) == f"done by {second.pid}"
        finally:
            second.send_signal(signal.SIGTERM)
            second.communicate(timeout=60)


@pytest.mark.slow
async def test_metrics_port_serves_the_workers_counts_and_json_logs(
    app: tuple[dict[str, str], object], tmp_path: Path
) -> None:
    env, worker_app = app
    manager = worker_app.manager  # type: ignore[attr-defined]
    proc = _worker(
        env, "--metrics-port", "0", "--metrics-refresh", "0.1", "--log-format", "json", "-v"
    )
    try:
        assert proc.stderr is not None
        line = await asyncio.to_thread(proc.stderr.readline)
        assert "metrics on http://127.0.0.1:" in line, line
        url = line.split("metrics on ", 1)[1].strip()
        async with manager.connect():
            for key in ("m1", "m2"):
                (tmp_path / f"open-{key}").touch()
                handle = await manager.workflow("gated_flow", key).execute(idempotency_key=key)
                assert await handle.result(timeout=30) == f"done by {proc.pid}"
        text = ""
        for _ in range(300):  # the status gauge is read once the worker's Manager is open
            text = await asyncio.to_thread(_get, url)
            if 'sagaway_workflows{status="COMPLETED"} 2.0' in text:
                break
            await asyncio.sleep(0.05)
        # Started by the client process, run and ended by the worker.
        assert 'sagaway_workflows_ended_total{status="COMPLETED",workflow="gated_flow"} 2.0' in text
        assert (
            'sagaway_activity_attempts_total{activity="gated",kind="activity",outcome="completed"}'
            " 2.0" in text
        )
        assert 'sagaway_workflows{status="COMPLETED"} 2.0' in text
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    # -v logs each workflow the worker takes from the database, as JSON lines with its key.
    records = [json.loads(x) for x in err.splitlines() if x.startswith("{")]
    assert any(r.get("workflow_key") == "m1" for r in records), err


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=5) as response:
        return str(response.read().decode())
