"""Migration scripts split into statements for SQLite, which runs one at a time: a trigger's
body (``BEGIN ... END``, itself holding statements) stays whole."""

from __future__ import annotations

import sqlite3

from sagaway.store.migrations import migrations, statements

SCRIPT = """
-- a comment; with a semicolon
CREATE TABLE t (a INTEGER);
CREATE TABLE log (a INTEGER);
CREATE TRIGGER t_log AFTER INSERT ON t
WHEN NEW.a IS NOT NULL
BEGIN
    INSERT INTO log (a) VALUES (NEW.a);
    DELETE FROM log WHERE a < NEW.a - 20;
END;
INSERT INTO t (a) VALUES (1)
"""


def test_trigger_bodies_stay_whole() -> None:
    parts = statements(SCRIPT)
    assert len(parts) == 4
    assert parts[2].startswith("CREATE TRIGGER") and parts[2].endswith("END")
    conn = sqlite3.connect(":memory:")
    for part in parts:
        conn.execute(part)
    assert conn.execute("SELECT a FROM log").fetchall() == [(1,)]


def test_every_shipped_sqlite_migration_runs_statement_by_statement() -> None:
    conn = sqlite3.connect(":memory:")
    for migration in migrations("sqlite"):
        for part in statements(migration.sql):
            conn.execute(part)
    names = {n for (n,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")}
    assert "steps_keep_superseded_error" in names
    assert not names & {"steps_keep_attempt_error_insert", "steps_keep_attempt_error_update"}
