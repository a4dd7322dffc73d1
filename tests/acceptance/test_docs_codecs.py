"""docs/codecs.md's examples run as written and print what the page says (the database holds
none of the personal data in clear; a ciphertext copied to another row is refused)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = re.findall(
    r"```python\n(.*?)```\n\nIt prints:\n\n```\n(.*?)```",
    (ROOT / "docs" / "codecs.md").read_text(),
    re.S,
)


def test_the_page_has_both_examples() -> None:
    assert len(EXAMPLES) == 2


@pytest.mark.parametrize(
    ("code", "printed"), EXAMPLES, ids=["no-plaintext-in-the-tables", "copied-ciphertext"]
)
def test_the_codecs_examples_print_what_the_page_says(
    tmp_path: Path, code: str, printed: str
) -> None:
    script = tmp_path / "codecs_demo.py"
    script.write_text(code)
    env = {k: v for k, v in os.environ.items() if k != "SAGAWAY_DATABASE_URL"}
    env["PYTHONPATH"] = os.pathsep.join(sys.path)
    done = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == printed.splitlines()
