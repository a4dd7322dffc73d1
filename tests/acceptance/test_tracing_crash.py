"""A workflow's spans join one trace across a kill -9 and its recovery in another process."""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.processes import Script, script

pytestmark = pytest.mark.long  # starts real processes: run by `pytest -m long`

APP = Path(__file__).with_name("tracing_app.py")


def _spawn(db_url: str, mode: str, env: dict[str, str]) -> Script:
    return script(
        APP,
        [db_url, "order-7", mode],
        env,
    )


@pytest.mark.slow
def test_spans_of_a_workflow_killed_and_recovered_elsewhere_form_one_trace(
    db_url: str, tmp_path: Path
) -> None:
    spans_file = tmp_path / "spans.jsonl"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "SPANS": str(spans_file)}
    victim = _spawn(db_url, "start", {**env, "BLOCK": "1"})
    assert victim.stdout is not None
    line = victim.stdout.readline()
    assert line == "BLOCKED\n", victim.stderr.read() if victim.stderr else line
    victim.send_signal(signal.SIGKILL)
    victim.communicate(timeout=10)
    assert victim.returncode == -signal.SIGKILL

    rescuer = _spawn(db_url, "recover", env)
    out, err = rescuer.communicate(timeout=90)
    assert rescuer.returncode == 0, err
    assert out.strip() == "shipped box-order-7"

    spans: list[dict[str, Any]] = [json.loads(line) for line in spans_file.read_text().splitlines()]
    assert {s["trace_id"] for s in spans} == {spans[0]["trace_id"]}  # one trace
    by_name: dict[str, list[dict[str, Any]]] = {}
    for span in spans:
        by_name.setdefault(span["name"], []).append(span)
    [start] = by_name["StartWorkflow:delivery"]
    [packed] = by_name["RunActivity:pack"]
    ships = by_name["RunActivity:ship"]
    [run] = by_name["RunWorkflow:delivery"]  # the killed process's run never ended
    assert start["pid"] == packed["pid"] == victim.pid
    assert start["parent_id"] is None
    # The rescuer's run continues the trace under the stored start span; its attempt of
    # `ship` is a child of that run. (The victim's attempt died before anything was recorded,
    # so the engine counts this one as attempt 1.)
    assert run["pid"] == rescuer.pid
    assert run["parent_id"] == start["span_id"]
    assert [s["pid"] for s in ships] == [rescuer.pid]
    assert ships[0]["parent_id"] == run["span_id"]
    assert ships[0]["attributes"]["sagaway.attempt"] == 1
    assert ships[0]["attributes"]["sagaway.outcome"] == "completed"
    # `pack` was recorded before the crash: the rescuer replays it without an attempt.
    # Its span's parent is the victim's run span, which died unexported with the process.
    assert packed["parent_id"] not in {s["span_id"] for s in spans}
    assert run["attributes"]["sagaway.workflow.key"] == "order-7"
