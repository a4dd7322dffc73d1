"""Named SQL queries, one file per dialect, and the fragments both use (``common.sql``).

A file holds blocks introduced by ``-- name: <query_name>``; queries are plain text with
parameters, never built by string formatting. A block introduced by ``-- fragment: <name>`` is
part of queries, not one: a line ``-- use: <name>`` inside a query stands for that fragment's
(or that other query's) text, so what two queries share is written once. Other whole-line
comments document the file and are not part of the queries (the server needs none of
them: they would travel with every unprepared execution and clutter pg_stat_activity).
"""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import LiteralString, cast

_NAME = re.compile(r"^--\s*(name|fragment):\s*(\w+)\s*$", re.MULTILINE)
_USE = re.compile(r"^\s*--\s*use:\s*(\w+)\s*$")


@functools.cache
def queries(dialect: str) -> dict[str, LiteralString]:
    """All named queries of ``dialect`` ("sqlite" or "postgres")."""
    here = Path(__file__)
    files = (here.with_name("common.sql"), here.with_name(f"{dialect}.sql"))
    lines = [line for f in files for line in f.read_text(encoding="utf-8").splitlines()]
    kept = (s for s in lines if _NAME.match(s) or _USE.match(s) or not s.lstrip().startswith("--"))
    parts = _NAME.split("\n".join(kept))
    blocks = list(zip(parts[1::3], parts[2::3], parts[3::3], strict=True))
    bodies = {name: cast(LiteralString, body.strip().rstrip(";")) for _, name, body in blocks}
    return {name: _expand(bodies[name], bodies) for kind, name, _ in blocks if kind == "name"}


def _expand(body: LiteralString, bodies: dict[str, LiteralString]) -> LiteralString:
    """``body`` with each ``-- use: <name>`` line replaced by that fragment's (or query's)
    text."""
    lines: list[LiteralString] = []
    for line in body.splitlines():
        used = _USE.match(line)
        lines.append(_expand(bodies[used.group(1)], bodies) if used else line)
    return "\n".join(lines)
