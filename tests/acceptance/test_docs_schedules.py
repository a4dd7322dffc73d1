"""docs/schedules.md's worked example runs as written and prints what the page says."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.acceptance.docs_examples import assert_prints, code_blocks, page, printed

pytestmark = pytest.mark.long  # runs documented examples in subprocesses (CI runs them)


def test_the_schedules_example_runs_its_ticks_and_a_manual_trigger(tmp_path: Path) -> None:
    text = page("schedules.md")
    code = code_blocks(text)[2]
    assert "asyncio.run(main())" in code
    assert_prints(tmp_path, code, printed(text), "schedules_demo.py")
