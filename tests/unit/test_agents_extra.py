"""Without Pydantic AI installed, ``import sagaway.agents`` says which extra to install."""

from __future__ import annotations

import subprocess
import sys


def test_the_missing_extra_gives_its_one_line_error() -> None:
    # ``None`` in sys.modules makes the import fail as if the package were not installed.
    code = "import sys; sys.modules['pydantic_ai'] = None; import sagaway.agents"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 1
    assert result.stderr.splitlines()[-1] == (
        "ImportError: sagaway.agents needs Pydantic AI: pip install 'sagaway[agents]'"
    )


def test_sagaway_imports_without_the_extra() -> None:
    code = "import sys; sys.modules['pydantic_ai'] = None; import sagaway, sagaway.analysis"
    subprocess.run([sys.executable, "-c", code], timeout=60, check=True)
