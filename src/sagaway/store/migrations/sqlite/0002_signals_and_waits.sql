-- Sagaway schema v2 (SQLite): durable waits (signals, timers, child results) and signals.

-- What a WAITING execution waits for: 'signal:<name>', 'timer', 'child:<key>'.
ALTER TABLE workflows ADD COLUMN waiting_for TEXT;

CREATE TABLE signals (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id        TEXT NOT NULL REFERENCES workflows (run_id),
    name          TEXT NOT NULL,
    payload       TEXT NOT NULL,
    dedupe_id     TEXT,
    created_at    REAL NOT NULL,
    consumed_call TEXT,
    consumed_at   REAL,
    rejected      TEXT
);

-- A repeated dedupe_id is delivered once.
CREATE UNIQUE INDEX signals_dedupe ON signals (run_id, name, dedupe_id)
    WHERE dedupe_id IS NOT NULL;

-- Undelivered signals of one workflow and name, in the order sent.
CREATE INDEX signals_pending ON signals (run_id, name, id) WHERE consumed_at IS NULL;
