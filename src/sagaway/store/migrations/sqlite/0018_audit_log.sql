-- Sagaway schema v18 (SQLite): the audit trail of operator actions (PostgreSQL: schema v22).
-- One row per action that changed something (a cancel accepted, a terminate, a retry, a fork, a
-- purge, a schedule change, a start or a signal an operator tool made), written in the
-- transaction that made the change; entry_id (chosen once by the caller) makes a retried call
-- write it once. `at` is the database's clock, never the caller's. No foreign key on purpose:
-- purging a workflow keeps its entries (and the purge has its own). Rows stay until deleted
-- by hand (docs/retention.md); AUTOINCREMENT never gives a deleted seq to a new row.
CREATE TABLE audit_log (
    seq          INTEGER PRIMARY KEY AUTOINCREMENT,
    entry_id     TEXT NOT NULL UNIQUE,
    at           REAL NOT NULL DEFAULT ((julianday('now') - 2440587.5) * 86400.0),
    actor        TEXT NOT NULL,
    on_behalf_of TEXT,
    action       TEXT NOT NULL,
    run_id       TEXT,
    target       TEXT,
    reason       TEXT,
    details      TEXT
);
CREATE INDEX audit_log_run ON audit_log (run_id, seq) WHERE run_id IS NOT NULL;
CREATE INDEX audit_log_target ON audit_log (target, seq) WHERE target IS NOT NULL;
CREATE INDEX audit_log_at ON audit_log (at);
