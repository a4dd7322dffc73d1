"""Named SQL queries, one file per dialect.

A file holds blocks introduced by ``-- name: <query_name>``; queries are plain text with
parameters, never built by string formatting.
"""

from __future__ import annotations

import functools
import importlib.resources
import re
from typing import LiteralString, cast

_NAME = re.compile(r"^--\s*name:\s*(\w+)\s*$", re.MULTILINE)


@functools.cache
def queries(dialect: str) -> dict[str, LiteralString]:
    """All named queries of ``dialect`` ("sqlite" or "postgres")."""
    text = importlib.resources.files(__package__).joinpath(f"{dialect}.sql").read_text()
    parts = _NAME.split(text)
    out: dict[str, LiteralString] = {}
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        out[name] = cast(LiteralString, body.strip().rstrip(";"))
    return out
