"""docs/testing.md's example, an application module with a module-level Manager tested through
``isolated_manager``, passes as written under pytest-asyncio's strict and auto modes; so does the
test in docs/long-running.md."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.long  # pytest run in a subprocess, four times


def _files(page: str) -> dict[str, str]:
    """The page's python blocks that begin with a file name comment (``# shop.py``)."""
    blocks = re.findall(r"```python\n# (\w+\.py)\n(.*?)```", page, re.S)
    return {name: code for name, code in blocks}


def _pytest(directory: Path, mode: str) -> subprocess.CompletedProcess[str]:
    """pytest in ``directory``, with a configuration of its own (not this project's)."""
    (directory / "pytest.ini").write_text(
        f"[pytest]\nasyncio_mode = {mode}\nasyncio_default_fixture_loop_scope = function\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SAGAWAY_", "PYTEST_"))}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-W", "error"],
        cwd=directory, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


@pytest.mark.parametrize("mode", ["strict", "auto"])
def test_the_testing_example_passes(tmp_path: Path, mode: str) -> None:
    files = _files((ROOT / "docs" / "testing.md").read_text())
    assert sorted(files) == ["conftest.py", "shop.py", "test_shop.py"]
    for name, code in files.items():
        (tmp_path / name).write_text(code)
    done = _pytest(tmp_path, mode)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 passed" in done.stdout, done.stdout
    assert not (tmp_path / "sagaway.db").exists()  # the application's own database untouched


@pytest.mark.parametrize("mode", ["strict", "auto"])
def test_the_long_running_example_passes(tmp_path: Path, mode: str) -> None:
    page = (ROOT / "docs" / "long-running.md").read_text()
    section = page[page.index("## Testing without waiting") :]
    code = re.findall(r"```python\n(.*?)```", section, re.S)[0]
    (tmp_path / "test_reminder.py").write_text(code)
    done = _pytest(tmp_path, mode)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout, done.stdout
