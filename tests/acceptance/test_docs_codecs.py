"""docs/codecs.md's examples run as written and print what the page says (the database holds
none of the personal data in clear; a ciphertext copied to another row is refused)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.acceptance.docs_examples import assert_prints, page

EXAMPLES = re.findall(
    r"```python\n(.*?)```\n\nIt prints:\n\n```\n(.*?)```", page("codecs.md"), re.S
)


def test_the_page_has_both_examples() -> None:
    assert len(EXAMPLES) == 2


@pytest.mark.parametrize(
    ("code", "printed"), EXAMPLES, ids=["no-plaintext-in-the-tables", "copied-ciphertext"]
)
def test_the_codecs_examples_print_what_the_page_says(
    tmp_path: Path, code: str, printed: str
) -> None:
    assert_prints(tmp_path, code, printed, "codecs_demo.py")
