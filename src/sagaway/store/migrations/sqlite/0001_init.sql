-- Sagaway schema v1 (SQLite). Times are epoch seconds (REAL).
CREATE TABLE workflows (
    run_id           TEXT PRIMARY KEY,
    key              TEXT NOT NULL,
    is_current       INTEGER NOT NULL DEFAULT 1,
    -- use: workflows_v1_text_columns
    created_at       REAL NOT NULL,
    updated_at       REAL NOT NULL,
    ended_at         REAL,
    lease_token      TEXT,
    lease_owner      TEXT,
    lease_expires_at REAL,
    next_run_at      REAL,
    suspend_count    INTEGER NOT NULL DEFAULT 0
);

-- One current execution per key; terminated predecessors keep their rows with is_current = 0.
CREATE UNIQUE INDEX workflows_current_key ON workflows (key) WHERE is_current = 1;

-- What the Recovery Worker scans: live executions only.
CREATE INDEX workflows_live ON workflows (status, next_run_at)
    WHERE status IN ('PENDING', 'RUNNING', 'WAITING', 'SUSPENDED');

CREATE INDEX workflows_created ON workflows (created_at);

CREATE TABLE steps (
    run_id     TEXT NOT NULL REFERENCES workflows (run_id),
    call_id    TEXT NOT NULL,
    -- use: steps_v1_text_columns
    started_at REAL NOT NULL,
    ended_at   REAL,
    PRIMARY KEY (run_id, call_id)
) WITHOUT ROWID;
