"""The README's examples run as written."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "SAGAWAY_DATABASE_URL"}
    env["PYTHONPATH"] = os.pathsep.join(sys.path)
    return env


def test_quickstart_matches_the_readme_and_runs(tmp_path: Path) -> None:
    readme = (ROOT / "README.md").read_text()
    example = (ROOT / "examples" / "quickstart.py").read_text()
    code = example.split("\n", 1)[1]  # after the provenance comment
    assert f"```python\n{code}```" in readme
    for _ in range(2):  # the second run attaches to the finished order-1: nothing runs again
        out = subprocess.run(
            [sys.executable, str(ROOT / "examples" / "quickstart.py")],
            cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=60, check=True,
        ).stdout  # fmt: skip
        assert out == "failed and compensated: [DECLINED] card declined\n"
    show = subprocess.run(
        [sys.executable, "-m", "sagaway", "show", "order-1", "--json"],
        cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=60, check=True,
    ).stdout  # fmt: skip
    assert '"status": "FAILED"' in show and '"kind": "compensation"' in show


def test_demo_runs_on_the_embedded_default(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "sagaway", "demo"],
        cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    out = result.stdout
    assert (tmp_path / "sagaway.db").exists()
    assert out.count("COMPLETED") >= 4 and "FAILED" in out
    # compensations in reverse order: points before balance
    assert out.index("points.cancel") < out.index("balance.cancel")
    listed = subprocess.run(
        [sys.executable, "-m", "sagaway", "list", "--json"],
        cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=60, check=True,
    ).stdout  # fmt: skip
    statuses = sorted(line.split('"status": "')[1].split('"')[0] for line in listed.splitlines())
    assert statuses == ["COMPLETED", "FAILED"]
