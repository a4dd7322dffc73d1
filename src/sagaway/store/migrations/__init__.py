"""Versioned schema migrations, shipped as package data: ``<dialect>/NNNN_name.sql``."""

from __future__ import annotations

import importlib.resources
from typing import NamedTuple


class Migration(NamedTuple):
    version: int
    name: str
    sql: str


def migrations(dialect: str) -> list[Migration]:
    """The migrations of ``dialect`` in version order."""
    folder = importlib.resources.files(__package__).joinpath(dialect)
    out = []
    for entry in folder.iterdir():
        if entry.name.endswith(".sql"):
            number, _, rest = entry.name.partition("_")
            out.append(Migration(int(number), rest.removesuffix(".sql"), entry.read_text()))
    return sorted(out)


def latest_version(dialect: str) -> int:
    found = migrations(dialect)
    return found[-1].version if found else 0
