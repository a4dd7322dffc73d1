"""A lint finding: where, which rule, and what to do instead."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True, order=True)
class Finding:
    """One problem in one file.

    ``line`` and ``col`` are 1-based, as editors and ``ruff``/``flake8`` print them, so
    ``path:line:col`` can be clicked in a terminal.
    """

    path: str
    line: int
    col: int
    code: str
    message: str

    def format(self) -> str:
        """``path:line:col: CODE message``, one line."""
        return f"{self.path}:{self.line}:{self.col}: {self.code} {self.message}"

    def to_dict(self) -> dict[str, str | int]:
        """A JSON-ready mapping (the ``--format json`` output)."""
        return dataclasses.asdict(self)
