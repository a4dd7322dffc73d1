"""flake8 plugin: the same rules, reported by flake8 (``flake8 --select SW``).

flake8 is not a dependency of sagaway; flake8 finds this class through the
``flake8.extension`` entry point ``SW`` and calls it by its plugin protocol. flake8 runs one file
at a time, so durable calls of functions defined in other files are not checked here
(``sagaway lint`` analyses all the files it is given together).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from sagaway import __version__
from sagaway.analysis.api import check_tree


class SagawayChecker:
    """A flake8 AST plugin: ``(line, col, "SWxxx message", type)`` for each finding."""

    name = "sagaway"
    version = __version__

    def __init__(
        self, tree: ast.AST, filename: str = "stdin", lines: Sequence[str] | None = None
    ) -> None:
        self.tree = tree
        self.filename = filename
        self.lines = lines if lines is not None else _read_lines(filename)

    def run(self) -> Iterator[tuple[int, int, str, type[Any]]]:
        """Findings with flake8's 0-based column; ``# sagaway: ignore`` comments apply too."""
        if not isinstance(self.tree, ast.Module):
            return
        for finding in check_tree(self.tree, self.filename, self.lines):
            yield finding.line, finding.col - 1, f"{finding.code} {finding.message}", type(self)


def _read_lines(filename: str) -> list[str] | None:
    """The file's lines, for suppression comments, when flake8 did not pass them."""
    try:
        return Path(filename).read_text(encoding="utf-8").splitlines(keepends=True)
    except (OSError, UnicodeDecodeError):
        return None
