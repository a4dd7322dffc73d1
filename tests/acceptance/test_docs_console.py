"""docs/console.md: its example runs as written (with a free port instead of 8080) and shows
what the page says: one COMPLETED and one FAILED workflow, the FAILED one with its error and
its compensations."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from tests.acceptance.console_support import ROOT, env, ui_process

pytest.importorskip("uvicorn", reason="the [ui] extra is part of the dev install")
pytestmark = pytest.mark.slow

PAGE = ROOT / "docs" / "console.md"


def _commands() -> list[list[str]]:
    block = re.findall(r"## Try it\n\n```sh\n(.*?)```", PAGE.read_text(encoding="utf-8"), re.S)[0]
    lines = [line.split("#")[0].strip() for line in block.splitlines()]
    return [shlex.split(line) for line in lines if line]


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as answer:
        return str(answer.read().decode())


def test_the_try_it_example_shows_a_completed_and_a_compensated_saga(tmp_path: Path) -> None:
    install, demo, ui = _commands()
    assert install == ["pip", "install", "sagaway[ui]"]
    assert demo == ["sagaway", "demo", "--db", "sqlite:///demo.db"]
    assert ui == ["sagaway", "ui", "--db", "sqlite:///demo.db"]
    subprocess.run(
        [sys.executable, "-m", "sagaway", *demo[1:]],
        cwd=tmp_path, env=env(), capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    url = f"sqlite:///{tmp_path / 'demo.db'}"  # the same file, wherever the test runs from
    with ui_process(url, tmp_path / "ui.log") as base:
        listing = _get(base + "/")
        counts = dict(re.findall(r'data-status="(\w+)">(\d+)<', listing))
        assert (counts["COMPLETED"], counts["FAILED"], counts["total"]) == ("1", "1", "2")
        failed = re.search(
            r'href="/workflows/([^"]+)"[^<]*</a>(?:(?!</tr>).)*FAILED', listing, re.S
        )
        assert failed is not None
        page = _get(f"{base}/workflows/{failed.group(1)}")
        assert 'id="last-error"' in page and "Failed with this error" in page
        assert page.count('class="tl-row tl-comp"') >= 2  # its steps, undone
        assert urllib.parse.unquote(failed.group(1)) in page
