-- Sagaway schema v22 (PostgreSQL): the audit trail of operator actions (SQLite: schema v18).
-- One row per action that changed something (a cancel accepted, a terminate, a retry, a fork, a
-- purge, a schedule change, a start or a signal an operator tool made), written in the
-- transaction that made the change; entry_id (chosen once by the caller) makes a transaction
-- retried after a lost acknowledgement write it once. `at` is the database server's clock
-- (clock_timestamp: the time of the insert, not of the transaction's start), never the caller's.
-- No foreign key on purpose: purging a workflow keeps its entries (and the purge has its own).
-- Rows stay until deleted by hand (docs/retention.md).
CREATE TABLE audit_log (
    seq          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    entry_id     TEXT COLLATE "C" NOT NULL UNIQUE,
    at           DOUBLE PRECISION NOT NULL
                 DEFAULT extract(epoch FROM clock_timestamp())::double precision,
    actor        TEXT NOT NULL,
    on_behalf_of TEXT,
    action       TEXT COLLATE "C" NOT NULL,
    run_id       TEXT COLLATE "C",
    target       TEXT COLLATE "C",
    reason       TEXT,
    details      TEXT
);
CREATE INDEX audit_log_run ON audit_log (run_id, seq) WHERE run_id IS NOT NULL;
CREATE INDEX audit_log_target ON audit_log (target, seq) WHERE target IS NOT NULL;
CREATE INDEX audit_log_at ON audit_log (at);
