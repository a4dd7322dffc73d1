-- Sagaway schema v8 (SQLite): the error of every failed attempt of a step, not only the last,
-- as on PostgreSQL (its schema v10). A step row keeps the error of its latest attempt; each
-- write of a step with an error copies that error here, keyed by the attempt number, in the
-- writing transaction. Steps written without an error (every successful attempt) do not fire
-- the triggers, so a step that succeeds costs what it did. The last 20 attempts of a step are
-- kept; rows go with their step (ON DELETE CASCADE; the store turns foreign keys on).
CREATE TABLE attempt_errors (
    run_id  TEXT NOT NULL,
    call_id TEXT NOT NULL,
    attempt INTEGER NOT NULL,
    error   TEXT NOT NULL,
    at      REAL,
    PRIMARY KEY (run_id, call_id, attempt),
    FOREIGN KEY (run_id, call_id) REFERENCES steps (run_id, call_id) ON DELETE CASCADE
) WITHOUT ROWID;

CREATE TRIGGER steps_keep_attempt_error_insert AFTER INSERT ON steps
WHEN NEW.error IS NOT NULL
-- use: attempt_error_kept_v8

CREATE TRIGGER steps_keep_attempt_error_update AFTER UPDATE ON steps
WHEN NEW.error IS NOT NULL
-- use: attempt_error_kept_v8
