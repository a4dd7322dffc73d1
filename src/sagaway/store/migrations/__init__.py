"""Versioned schema migrations, shipped as package data: ``<dialect>/NNNN_name.sql``.

A migration may share text with others: a line ``-- use: <name>`` stands for the fragment
``fragments/<name>.sql`` (shared by both dialects; fragments may use others), resolved when the
migration is loaded, so the text a database runs is the one written out in full before. A
fragment's first lines of ``--`` comments say what it is and are not part of its text.

Both stores migrate the same way, in one transaction at open: create ``schema_migrations`` if
missing, read the version it records, refuse a database newer than this Sagaway (``pending``),
then run each missing migration and record it (``record``). How a script is run and how
concurrent first starts are serialised is the store's own.
"""

from __future__ import annotations

import functools
import re
import sqlite3
import time
from pathlib import Path
from typing import Any, NamedTuple

from sagaway import errors

_USE = re.compile(r"^\s*--\s*use:\s*(\w+)\s*$")
FRAGMENTS = "fragments"
"""The folder of the fragments migrations use."""
_HERE = Path(__file__).parent
"""The package's folder (package data is installed as files beside the modules)."""


class Migration(NamedTuple):
    version: int
    name: str
    sql: str


def migrations(dialect: str) -> list[Migration]:
    """The migrations of ``dialect`` in version order."""
    return [_load(version, name, path) for version, name, path in _files(dialect)]


@functools.cache
def _files(dialect: str) -> tuple[tuple[int, str, Path], ...]:
    """(version, name, file) of each migration of ``dialect``, in version order: what a
    store that is up to date needs, without reading a script."""
    found = []
    for entry in (_HERE / dialect).iterdir():
        if entry.name.endswith(".sql"):
            number, _, rest = entry.name.partition("_")
            found.append((int(number), rest.removesuffix(".sql"), entry))
    return tuple(sorted(found))


def _load(version: int, name: str, path: Path) -> Migration:
    return Migration(version, name, resolve(path.read_text(encoding="utf-8"), fragments()))


@functools.cache
def fragments() -> dict[str, str]:
    """Every fragment by name (its file's name without ``.sql``)."""
    folder = _HERE / FRAGMENTS
    return {
        entry.name.removesuffix(".sql"): _without_description(entry.read_text(encoding="utf-8"))
        for entry in folder.iterdir()
        if entry.name.endswith(".sql")
    }


def _without_description(text: str) -> str:
    lines = text.splitlines(keepends=True)
    while lines and lines[0].startswith("--") and not _USE.match(lines[0].rstrip("\r\n")):
        lines.pop(0)
    return "".join(lines)


def resolve(text: str, fragments: dict[str, str]) -> str:
    """``text`` with each ``-- use: <name>`` line replaced by that fragment's text (resolved in
    turn); ``KeyError`` names a fragment that does not exist."""
    out: list[str] = []
    for line in text.splitlines(keepends=True):
        used = _USE.match(line.rstrip("\r\n"))
        if used is None:
            out.append(line)
            continue
        body = resolve(fragments[used.group(1)], fragments)
        out.append(body if line.endswith("\n") else body.removesuffix("\n"))
    return "".join(out)


def latest_version(dialect: str) -> int:
    found = _files(dialect)
    return found[-1][0] if found else 0


def pending(dialect: str, current: int, database: str) -> list[Migration]:
    """The migrations a database at schema version ``current`` lacks, in order (only their
    scripts are read: opening an up-to-date database reads none).

    ``SagawayError`` if the database is newer than this Sagaway (``database`` names it).
    """
    latest = latest_version(dialect)
    if current > latest:
        raise errors.SagawayError(
            f"database {database} has schema version {current}, newer than this "
            f"Sagaway's {latest}; upgrade Sagaway"
        )
    return [_load(*file) for file in _files(dialect) if file[0] > current]


def record(migration: Migration) -> dict[str, Any]:
    """Parameters of the dialect's ``record_migration`` query, once ``migration`` ran."""
    return {"version": migration.version, "name": migration.name, "applied_at": time.time()}


def statements(script: str) -> list[str]:
    """The statements of a migration script, for a driver that runs one at a time.

    Migration files hold plain DDL; no statement contains a semicolon inside a literal. A
    trigger's body (``BEGIN ... END``) holds several statements: pieces are joined until SQLite
    says the statement is complete.
    """
    body = "\n".join(line for line in script.splitlines() if not line.strip().startswith("--"))
    out: list[str] = []
    pending = ""
    for piece in body.split(";"):
        pending += piece + ";"
        if sqlite3.complete_statement(pending):
            if pending.strip(" \n;"):
                out.append(pending.strip().removesuffix(";").strip())
            pending = ""
    if pending.strip(" \n;"):
        out.append(pending.strip().removesuffix(";").strip())
    return out
