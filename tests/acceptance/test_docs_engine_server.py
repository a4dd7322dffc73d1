"""docs/engine-server.md: its example runs as written and prints what the page says, the
client-without-SDK snippet is the example's code, and what the page promises of a real
``sagaway server`` process holds (a port in use, a restart under a running workflow)."""

from __future__ import annotations

import asyncio
import logging
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import sagaway as sw

pytestmark = pytest.mark.long  # runs documented examples in subprocesses (CI runs them)

pytest.importorskip("grpc", reason="the [server] extra is part of the dev install")

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "engine-server.md"
EXAMPLE = ROOT / "examples" / "engine_server.py"


def _env() -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("SAGAWAY_DATABASE_URL", "SAGAWAY_TOKEN", "SAGAWAY_SERVER_TOKEN")
    }
    env["PYTHONPATH"] = os.pathsep.join(sys.path)
    return env


class Server:
    """A ``sagaway server`` process of this test; ``address`` from its ready line."""

    def __init__(self, db: str, listen: str = "127.0.0.1:0") -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "sagaway", "server", "--db", db, "--listen", listen],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=_env(),
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()  # the ready line, or "" if it exited
        assert line.startswith("listening on "), (line, self.proc.communicate(timeout=30))
        self.address = line.removeprefix("listening on ").strip()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()  # SIGKILL to our own child
        self.proc.communicate(timeout=30)

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        self.proc.communicate(timeout=30)
        return self.proc.returncode


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    started = Server(f"sqlite:///{tmp_path / 'engine.db'}")
    try:
        yield started
    finally:
        started.kill()


def test_the_example_runs_sagas_through_a_server_and_prints_what_the_page_says() -> None:
    out = subprocess.run(
        [sys.executable, str(EXAMPLE)],
        cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=120, check=True,
    ).stdout  # fmt: skip
    expected = re.search(r"\$ python examples/engine_server.py\n(.*?)```", PAGE.read_text(), re.S)
    assert expected is not None
    shown = re.sub(r"127\.0\.0\.1:\d+", "127.0.0.1:PORT", out)
    assert shown.splitlines() == expected.group(1).splitlines()


def test_the_pages_client_without_sdk_is_the_examples_code() -> None:
    page_code = re.findall(r"```python\n(def start_without_sdk.*?)```", PAGE.read_text(), re.S)
    assert len(page_code) == 1
    assert page_code[0] in EXAMPLE.read_text()
    assert "import sagaway" not in page_code[0] and "sw." not in page_code[0]


def test_a_second_server_on_a_port_in_use_refuses_to_start(server: Server, tmp_path: Path) -> None:
    second = subprocess.run(
        [sys.executable, "-m", "sagaway", "server", "--db", f"sqlite:///{tmp_path / 'other.db'}",
         "--listen", server.address],
        env=_env(), capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert second.returncode == 4, second
    assert "listening on" not in second.stdout
    assert f"cannot listen on {server.address}" in second.stderr
    assert "Traceback" not in second.stderr
    assert server.proc.poll() is None  # the first one still serves
    assert server.stop() == 0


def test_a_server_whose_database_is_down_says_so_at_once() -> None:
    started = time.monotonic()
    refused = subprocess.run(
        [sys.executable, "-m", "sagaway", "server", "--db",
         "postgresql://postgres@127.0.0.1:1/nosuch", "--listen", "127.0.0.1:0"],
        env=_env(), capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert refused.returncode == 4, refused
    assert time.monotonic() - started < 20  # not the store's 30 s pool timeout
    assert "listening on" not in refused.stdout
    assert "127.0.0.1" in refused.stderr and "Traceback" not in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1


async def test_a_workflow_resumes_from_its_last_record_when_the_server_comes_back(
    tmp_path: Path,
) -> None:
    db = f"sqlite:///{tmp_path / 'engine.db'}"
    first = Server(db)
    reached, gate = asyncio.Event(), asyncio.Event()
    runs: dict[str, int] = {"prepare": 0, "slow": 0}
    manager = sw.Manager(f"grpc://{first.address}", lease_timeout=2, poll_interval=0.2)

    @manager.register_activity()
    async def prepare() -> None:
        runs["prepare"] += 1

    @manager.register_activity()
    async def slow() -> str:
        runs["slow"] += 1
        reached.set()
        await gate.wait()
        return "done"

    @manager.register_workflow()
    async def two_steps() -> str:
        await manager.activity(prepare).execute_get()
        return str(await manager.activity(slow).execute_get())

    met_dead_server = asyncio.Event()
    loop = asyncio.get_running_loop()

    class EngineError(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if getattr(record, "action", None) == "engine_error":
                loop.call_soon_threadsafe(met_dead_server.set)

    handler = EngineError()
    logging.getLogger("sagaway.worker").addHandler(handler)
    restarted: Server | None = None
    try:
        async with manager:
            await manager.workflow(two_steps).execute(idempotency_key="w-1")
            await asyncio.wait_for(reached.wait(), 30)  # `prepare` is recorded, `slow` runs
            first.kill()  # kill -9 while a step is in flight
            gate.set()  # `slow` ends, but its outcome cannot be recorded: no server
            # the outcome's write fails (UNAVAILABLE): the worker drops the execution
            await asyncio.wait_for(met_dead_server.wait(), 30)
            restarted = Server(db, listen=first.address)
            result = await manager.get_workflow("w-1").result(timeout=60)
        assert result == "done"
        assert runs["prepare"] == 1  # recorded before the kill: not run again
        assert runs["slow"] == 2  # the step in flight ran again, as after a crash
    finally:
        logging.getLogger("sagaway.worker").removeHandler(handler)
        first.kill()
        if restarted is not None:
            assert restarted.stop() == 0
