"""The benchmark's absurd adapter: absurd's schema installed from absurdctl, the saga (happy path
and compensation) run by absurd workers, and a killed process's tasks finished by a new one."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import urllib.parse
from pathlib import Path
from typing import Any

import pytest
from benchmarks import workload

from tests.conftest import POSTGRES_URL, require_postgres

pytest.importorskip("absurd_sdk", reason="absurd-sdk is a benchmark extra (pip install '.[bench]')")
pytest.importorskip("absurdctl", reason="absurdctl carries absurd's schema (the bench extra)")

from benchmarks import absurd_adapter

pytestmark = [pytest.mark.direct_db, pytest.mark.long]


@pytest.fixture
def absurd_url() -> Any:
    require_postgres()
    parts = urllib.parse.urlsplit(POSTGRES_URL)
    name = f"test_absurd_{os.getpid()}"
    admin = urllib.parse.urlunsplit(parts._replace(path="/postgres", query=""))
    url = urllib.parse.urlunsplit(parts._replace(path=f"/{name}", query=""))
    absurd_adapter.reset_database(admin, url)
    yield url
    absurd_adapter.drop(admin, name)


def _connections(url: str) -> int:
    import psycopg

    name = urllib.parse.urlsplit(url).path.lstrip("/")
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) - 1 FROM pg_stat_activity WHERE datname = %s", (name,)
        ).fetchone()
    assert row is not None
    return int(row[0])


def _services(tmp_path: Path) -> workload.Services:
    services = workload.Services({"kind": "sqlite", "dir": str(tmp_path / "services")})
    services.create()
    return services


def test_the_saga_completes_and_compensates_on_absurd(absurd_url: str, tmp_path: Path) -> None:
    services = _services(tmp_path)
    fail = {f"ok-{i}": None for i in range(1, 20)} | {"declined": workload.FAIL_STEP}

    async def run() -> dict[str, Any]:
        adapter = absurd_adapter.AbsurdAdapter({"url": absurd_url}, services)
        await adapter.open()
        try:
            # all at once: the client's first calls are concurrent (one connection still)
            started = await asyncio.gather(*(adapter.start(i, f) for i, f in fail.items()))
            handles = dict(zip(fail, started, strict=True))
            again = await adapter.start("ok-1", None)  # the same id: the same task
            assert again == handles["ok-1"]
            results = {i: await adapter.result(h) for i, h in handles.items()}
            results["counts"] = await adapter.counts()
            results["connections"] = _connections(absurd_url)
            return results
        finally:
            await adapter.close()

    results = asyncio.run(asyncio.wait_for(run(), 60))
    for wf_id, fail_step in fail.items():
        assert results[wf_id] == workload.expected_result(fail_step)
    assert results["counts"] == {"completed": len(fail)}
    # the client and the workers (+1: the backend of counts()' closed connection may linger)
    assert results["connections"] <= 2 + absurd_adapter.WORKERS, results["connections"]
    check = services.check(fail)
    services.close()
    assert check["ok"], check


APP = """
import asyncio, json, sys
from benchmarks import absurd_adapter, workload
services = workload.Services({"kind": "sqlite", "dir": sys.argv[2]})
gate = sys.argv[3] == "hold"
async def main():
    adapter = absurd_adapter.AbsurdAdapter({"url": sys.argv[1]}, services)
    if gate:
        services.close_gate()  # every step waits: the process is killed with work claimed
    await adapter.open()
    if gate:
        for i in range(5):
            await adapter.start(f"c-{i}", None)
        while await adapter.counts() != {"running": 5}:  # claimed by this process's workers
            await asyncio.sleep(0.05)
        print("CLAIMED", flush=True)
        await asyncio.Event().wait()
    results = await adapter.wait_all([f"c-{i}" for i in range(5)])
    await adapter.close()
    print(json.dumps(results), flush=True)
asyncio.run(main())
"""


def test_a_killed_process_tasks_are_finished_by_a_new_one(absurd_url: str, tmp_path: Path) -> None:
    services = _services(tmp_path)
    services.close()
    repo = Path(__file__).resolve().parents[2]
    cmd = [sys.executable, "-c", APP, absurd_url, str(tmp_path / "services")]
    first = subprocess.Popen([*cmd, "hold"], cwd=repo, stdout=subprocess.PIPE, text=True)
    assert first.stdout is not None
    assert first.stdout.readline().strip() == "CLAIMED"
    os.kill(first.pid, signal.SIGKILL)
    first.wait(10)
    first.stdout.close()
    # the new process only waits: its workers claim the runs once the 5 s claims expire
    second = subprocess.run([*cmd, "wait"], cwd=repo, capture_output=True, text=True, timeout=90)
    assert second.returncode == 0, second.stderr
    import json

    results = json.loads(second.stdout.strip().splitlines()[-1])
    assert results == {f"c-{i}": workload.SUCCESS_RESULT for i in range(5)}
    check = workload.Services({"kind": "sqlite", "dir": str(tmp_path / "services")}).check(
        dict.fromkeys(results, None)
    )
    assert check["ok"], check
