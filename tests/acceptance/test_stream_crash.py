"""A stream reader across a worker's kill -9, and a reader's own kill -9, on every backend.

Worker A writes items 0..5 of a stream and blocks; reader 1 (``sagaway events --follow``) prints
the first three and is killed; worker A is killed while blocked. Reader 2 resumes at the offset
after the last line reader 1 printed and follows while no worker runs; worker B takes the
workflow over (its lease expired), replays the items already written (writing none again) and
writes the rest. Reader 2 exits once the workflow has ended. The two readers together saw every
item exactly once, in order, and the stream holds each item once.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import IO

import pytest

import sagaway as sw
from tests.processes import Script, script

APP = Path(__file__).with_name("streams_app.py")
N = 10

pytestmark = [pytest.mark.timeout(180)]


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}


def _worker(db_url: str, gate: Path) -> Script:
    return script(
        APP,
        [db_url, "stream-1", str(N), str(gate)],
        _env(),
    )


def _reader(db_url: str, offset: int) -> Script:
    command = [sys.executable, "-m", "sagaway", "events", "stream-1", "--db", db_url]
    command += ["--stream", "tokens", "--offset", str(offset), "--follow", "--json"]
    return subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env()
    )


def _line(stream: IO[str] | None) -> str:
    assert stream is not None
    return stream.readline()


def _kill(proc: Script) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=10)
    assert proc.returncode == -signal.SIGKILL


def test_a_reader_resumes_across_kill_9_of_the_worker_and_of_itself(
    db_url: str, tmp_path: Path
) -> None:
    gate = tmp_path / "open"
    procs: list[Script] = []
    try:
        worker_a = _worker(db_url, gate)
        procs.append(worker_a)
        assert _line(worker_a.stdout).strip() == "HANGING"  # items 0..5 written
        reader_1 = _reader(db_url, 0)
        procs.append(reader_1)
        first = [json.loads(_line(reader_1.stdout)) for _ in range(3)]
        _kill(reader_1)
        _kill(worker_a)
        reader_2 = _reader(db_url, first[-1]["offset"] + 1)
        procs.append(reader_2)
        # Reader 2 follows while no worker runs: items 3..5 are there already.
        resumed = [json.loads(_line(reader_2.stdout)) for _ in range(3)]
        gate.touch()
        worker_b = _worker(db_url, gate)
        procs.append(worker_b)
        out, err = worker_b.communicate(timeout=120)
        assert f"RESULT {N}" in out, err
        rest, err = reader_2.communicate(timeout=60)
        assert reader_2.returncode == 0, err
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.communicate(timeout=10)
    seen = first + resumed + [json.loads(line) for line in rest.splitlines()]
    assert [item["offset"] for item in seen] == list(range(N))
    assert [item["value"] for item in seen] == [{"i": i} for i in range(N)]
    assert [item["seq"] for item in seen] == list(range(1, N + 1))


async def test_the_stream_holds_each_item_once_after_a_takeover(
    db_url: str, tmp_path: Path
) -> None:
    """The store's own view: kill -9 while blocked, a second worker finishes; N items."""
    gate = tmp_path / "open"
    worker_a = _worker(db_url, gate)
    try:
        assert _line(worker_a.stdout).strip() == "HANGING"
        _kill(worker_a)
        gate.touch()
        worker_b = _worker(db_url, gate)
        out, err = worker_b.communicate(timeout=120)
        assert f"RESULT {N}" in out, err
    finally:
        for proc in (worker_a,):
            if proc.poll() is None:
                proc.kill()
                proc.communicate(timeout=10)
    async with sw.Manager(db_url).connect() as m:
        handle = m.get_workflow("stream-1")
        items = [i async for i in handle.read_stream("tokens")]
        steps = [s for s in (await handle.describe()).steps if s.kind is sw.StepKind.PUBLISH]
    assert [(i.offset, i.value) for i in items] == [(i, {"i": i}) for i in range(N)]
    assert len(steps) == N
