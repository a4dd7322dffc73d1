"""Versioned schema migrations, shipped as package data: ``<dialect>/NNNN_name.sql``.

Both stores migrate the same way, in one transaction at open: create ``schema_migrations`` if
missing, read the version it records, refuse a database newer than this Sagaway (``pending``),
then run each missing migration and record it (``record``). How a script is run and how
concurrent first starts are serialised is the store's own.
"""

from __future__ import annotations

import importlib.resources
import sqlite3
import time
from typing import Any, NamedTuple

from sagaway import errors


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


def pending(dialect: str, current: int, database: str) -> list[Migration]:
    """The migrations a database at schema version ``current`` lacks, in order.

    ``SagawayError`` if the database is newer than this Sagaway (``database`` names it).
    """
    known = migrations(dialect)
    latest = known[-1].version if known else 0
    if current > latest:
        raise errors.SagawayError(
            f"database {database} has schema version {current}, newer than this "
            f"Sagaway's {latest}; upgrade Sagaway"
        )
    return [migration for migration in known if migration.version > current]


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
