"""Running a docs page's example as the reader would: the page's code block written to a script
and run in a fresh directory, with this interpreter and no database URL of the environment.
Shared by the ``test_docs_*.py`` tests."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def page(name: str) -> str:
    """The text of ``docs/<name>``."""
    return (ROOT / "docs" / name).read_text()


def code_blocks(text: str) -> list[str]:
    """The ``python`` code blocks of ``text``, in order."""
    return re.findall(r"```python\n(.*?)```", text, re.S)


def printed(text: str, intro: str = "It prints:") -> str:
    """The first block after ``intro`` (a regular expression) in ``text``: what it prints."""
    return re.findall(intro + r"\n\n```\n(.*?)```", text, re.S)[0]


def run_example(
    tmp_path: Path, code: str, script: str = "example.py"
) -> subprocess.CompletedProcess[str]:
    """Run ``code`` as ``tmp_path/script`` (cwd ``tmp_path``); the test fails, with its
    stderr, unless it exits 0 within a minute."""
    path = tmp_path / script
    path.write_text(code)
    env = {k: v for k, v in os.environ.items() if k != "SAGAWAY_DATABASE_URL"}
    env["PYTHONPATH"] = os.pathsep.join(sys.path)
    done = subprocess.run(
        [sys.executable, str(path)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done


def assert_prints(tmp_path: Path, code: str, expected: str, script: str = "example.py") -> None:
    """``code`` run (``run_example``) prints the lines of ``expected``."""
    assert run_example(tmp_path, code, script).stdout.splitlines() == expected.splitlines()
