"""docs/agents.md's example runs as written, twice (the second run attaches to the first)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.long  # runs documented examples in subprocesses (CI runs them)

ROOT = Path(__file__).resolve().parents[2]


def test_the_agents_example_runs(tmp_path: Path) -> None:
    page = (ROOT / "docs" / "agents.md").read_text()
    code = re.findall(r"```python\n(# agent_saga\.py\n.*?)```", page, re.S)[0]
    (tmp_path / "agent_saga.py").write_text(code)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SAGAWAY_")}
    env["PYTHONPATH"] = os.pathsep.join(sys.path)
    outputs = [
        subprocess.run(
            [sys.executable, "agent_saga.py"],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        ).stdout
        for _ in range(2)
    ]
    assert outputs[0] == (
        "reserved a seat\nreleased seat-12\nfailed and compensated: [FULL] no table left\n"
    )
    assert outputs[1] == "failed and compensated: [FULL] no table left\n"
    show = subprocess.run(
        [
            sys.executable,
            "-m",
            "sagaway",
            "show",
            "evening-1",
            "--json",
            "--db",
            f"sqlite:///{tmp_path}/agent_saga.db",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    for name in ("planner.model_request", "planner.tool.reserve_seat", "planner.release_seat"):
        assert name in show
