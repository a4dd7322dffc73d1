"""docs/batch.md's search attribute example runs as written and prints what the page says;
then the page's command lines, run on what it left, print the lines the page shows."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from sagaway.cli.main import cli

ROOT = Path(__file__).resolve().parents[2]


def test_the_search_attribute_example_and_its_commands(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = (ROOT / "docs" / "batch.md").read_text()
    section = text.split("## Selecting by search attributes", 1)[1].split("\n## ", 1)[0]
    code = re.findall(r"```python\n(.*?)```", section, re.S)[0]
    printed = re.findall(r"It prints:\n\n```\n(.*?)```", section, re.S)[0]
    commands = re.findall(r"```\n(\$ sagaway .*?)```", section, re.S)[0]
    script = tmp_path / "example.py"
    script.write_text(code)
    env = {k: v for k, v in os.environ.items() if k != "SAGAWAY_DATABASE_URL"}
    env["PYTHONPATH"] = os.pathsep.join(sys.path)
    done = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == printed.splitlines()

    monkeypatch.chdir(tmp_path)  # the page's URLs are relative to where the example ran
    runs: list[tuple[list[str], list[str]]] = []
    for line in commands.splitlines():
        if line.startswith("$ sagaway "):
            runs.append((shlex.split(line.removeprefix("$ sagaway ")), []))
        else:
            runs[-1][1].append(line)
    assert len(runs) == 3
    for args, expected in runs:
        result = CliRunner().invoke(cli, args)
        assert result.exit_code == 0, (args, result.output)
        lines = [line.rstrip() for line in result.output.splitlines()]
        for line in expected:
            assert line in lines, (args, line, result.output)
