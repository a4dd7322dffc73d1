"""docs/cancellation.md's example runs as written and prints what the page says."""

from __future__ import annotations

from pathlib import Path

from tests.acceptance.docs_examples import code_blocks, page, run_example


def test_the_cancellation_example_compensates_and_ends_cancelled(tmp_path: Path) -> None:
    code = code_blocks(page("cancellation.md"))[0]
    out = run_example(tmp_path, code, "cancel_demo.py").stdout
    assert out.splitlines() == [
        "released res-o-17",
        "workflow 'o-17' ended CANCELLED: customer withdrew",
    ]
