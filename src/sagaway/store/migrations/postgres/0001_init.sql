-- Sagaway schema v1 (PostgreSQL). Times are epoch seconds (DOUBLE PRECISION).
-- Runs with search_path set to the Sagaway schema; names are unqualified.
-- Identifiers compared and ordered byte-wise (COLLATE "C"), as SQLite's BINARY collation does.
CREATE TABLE workflows (
    run_id           TEXT COLLATE "C" PRIMARY KEY,
    key              TEXT COLLATE "C" NOT NULL,
    is_current       BOOLEAN NOT NULL DEFAULT TRUE,
    -- use: workflows_v1_text_columns
    created_at       DOUBLE PRECISION NOT NULL,
    updated_at       DOUBLE PRECISION NOT NULL,
    ended_at         DOUBLE PRECISION,
    lease_token      TEXT,
    lease_owner      TEXT,
    lease_expires_at DOUBLE PRECISION,
    next_run_at      DOUBLE PRECISION,
    suspend_count    INTEGER NOT NULL DEFAULT 0
);

-- One current execution per key; terminated predecessors keep their rows with is_current = FALSE.
CREATE UNIQUE INDEX workflows_current_key ON workflows (key) WHERE is_current;

-- What the Recovery Worker scans: live executions only.
CREATE INDEX workflows_live ON workflows (status, next_run_at)
    WHERE status IN ('PENDING', 'RUNNING', 'WAITING', 'SUSPENDED');

CREATE INDEX workflows_created ON workflows (created_at);

CREATE TABLE steps (
    run_id     TEXT COLLATE "C" NOT NULL REFERENCES workflows (run_id),
    call_id    TEXT COLLATE "C" NOT NULL,
    -- use: steps_v1_text_columns
    started_at DOUBLE PRECISION NOT NULL,
    ended_at   DOUBLE PRECISION,
    PRIMARY KEY (run_id, call_id)
);
