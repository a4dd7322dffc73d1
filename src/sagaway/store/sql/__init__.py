"""Named SQL queries, one file per dialect.

A file holds blocks introduced by ``-- name: <query_name>``; queries are plain text with
parameters, never built by string formatting. Whole-line comments document the file and are
not part of the queries (the server needs none of them: they would travel with every unprepared
execution and clutter pg_stat_activity).
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
    lines = text.splitlines()
    text = "\n".join(s for s in lines if _NAME.match(s) or not s.lstrip().startswith("--"))
    parts = _NAME.split(text)
    out: dict[str, LiteralString] = {}
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        out[name] = cast(LiteralString, body.strip().rstrip(";"))
    return out
