"""Statements that name the schema of every Sagaway table: no session state to rely on.

The named queries (``sql/postgres.sql``) and the few statements built in Python name the tables
unqualified (``FROM workflows``). The store's connections used to set ``search_path`` once per
connection; behind a pooler in transaction mode (PgBouncer) each transaction may run on another
server connection, one that never saw that ``SET``, so a statement failed with ``relation
"workflows" does not exist`` (or, worse, ran in whatever schema that connection was left in).

Instead every statement a pooled connection sends has its tables qualified with the store's
schema: ``FROM workflows`` becomes ``FROM "sagaway".workflows``. The table names are read from
the migrations (``CREATE TABLE``), the schema is quoted as an identifier (``psycopg.sql``), and
each distinct statement is rewritten once per schema (a cache keyed by its text). A reference
to a table's columns (``workflows.concurrency_key``) is left as written: a qualified table is
still referenced by its bare name. Migration scripts (plain DDL, sent as bytes) are not
rewritten: they run with ``SET LOCAL search_path`` in the migration's own transaction.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql
from psycopg.abc import Params, Query
from psycopg.rows import Row

from sagaway.store import migrations

_CREATED = re.compile(r"\bCREATE\s+TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?(\w+)", re.IGNORECASE)
_CACHE_SIZE = 4096
"""Distinct statements remembered per schema (the named queries, and the listing's
combinations of filters): beyond it the cache starts again."""


@functools.cache
def table_names() -> frozenset[str]:
    """The tables Sagaway creates in its schema (migrations and ``schema_migrations``)."""
    named = Path(__file__).parent.parent / "sql" / "postgres.sql"
    texts = [named.read_text(encoding="utf-8")]
    texts += [migration.sql for migration in migrations.migrations("postgres")]
    return frozenset(name.lower() for text in texts for name in _CREATED.findall(text))


@functools.cache
def _table_reference() -> re.Pattern[str]:
    names = "|".join(sorted(table_names(), key=len, reverse=True))
    # A table follows one of these keywords (FROM a, JOIN a, INSERT INTO a, UPDATE a,
    # DELETE FROM a USING b); not one already qualified, nor a column (a.b).
    return re.compile(
        rf"\b(FROM|JOIN|INTO|UPDATE|USING|TABLE)(\s+(?:ONLY\s+)?)({names})\b(?!\s*\.)",
        re.IGNORECASE,
    )


class Qualifier:
    """Rewrites statements for one schema, remembering each rewritten text."""

    def __init__(self, schema: str) -> None:
        self.schema = schema
        self._prefix = sql.Identifier(schema).as_string(None) + "."
        self._done: dict[str, str] = {}

    def __call__(self, query: str) -> str:
        done = self._done.get(query)
        if done is None:
            done = self.rewrite(query)
            if len(self._done) >= _CACHE_SIZE:
                self._done.clear()
            self._done[query] = done
        return done

    def rewrite(self, query: str) -> str:
        """``query`` with every Sagaway table it names qualified with the schema."""
        prefix = self._prefix
        return _table_reference().sub(lambda m: f"{m[1]}{m[2]}{prefix}{m[3]}", query)


class QualifyingCursor(psycopg.AsyncCursor[Row]):
    """A cursor whose statements given as text are qualified by ``qualifier`` before psycopg
    converts them (``_convert_query`` is where execute, executemany and stream all pass).

    A pool's connections are made with ``cursor_factory=cursor_class(schema)``: the schema
    travels with the cursor class, whatever class the connection itself is.
    """

    qualifier: Qualifier | None = None

    def _convert_query(self, query: Query, params: Params | None = None) -> Any:
        qualify = self.qualifier
        if qualify is not None and isinstance(query, str):
            query = qualify(query)
        return super()._convert_query(query, params)


@functools.lru_cache(maxsize=32)
def cursor_class(schema: str) -> type[QualifyingCursor[Any]]:
    """The cursor class of the connections of ``schema``'s stores (one per schema: the stores
    of a process share the rewritten statements; a process that opens stores on many schemas,
    a test run, keeps the last few)."""
    return type(
        f"QualifyingCursor[{schema}]", (QualifyingCursor,), {"qualifier": Qualifier(schema)}
    )
