"""docs/telemetry.md's example runs as written and prints what the page says."""

from __future__ import annotations

from pathlib import Path

from tests.acceptance.docs_examples import code_blocks, page, printed, run_example


def test_the_telemetry_example_prints_the_metrics_and_spans_the_page_shows(
    tmp_path: Path,
) -> None:
    text = page("telemetry.md")
    done = run_example(tmp_path, code_blocks(text)[0], "telemetry_demo.py")
    assert done.stdout.splitlines() == printed(text, r"It prints[^\n]*").splitlines()
    logged = [line for line in done.stderr.splitlines() if '"reserving stock"' in line]
    assert len(logged) == 2 and all('"workflow_key": "o-' in line for line in logged)
