-- Sagaway schema v20 (PostgreSQL): every cancel request, accepted or not (SQLite: schema v16).
-- workflows.cancel_reason keeps the first accepted request's reason (the one delivered); this
-- log keeps each request: its reason, when it came, and whether it was accepted (False: the
-- workflow had already ended), written by the statement that decides it. Where it was delivered
-- is its workflow's cancel step; `show` and the console put the two together. Rows go with
-- their workflow (purge).
CREATE TABLE cancel_requests (
    seq          BIGSERIAL PRIMARY KEY,
    run_id       TEXT COLLATE "C" NOT NULL REFERENCES workflows (run_id) ON DELETE CASCADE,
    reason       TEXT NOT NULL,
    requested_at DOUBLE PRECISION NOT NULL,
    accepted     BOOLEAN NOT NULL
);
CREATE INDEX cancel_requests_by_run ON cancel_requests (run_id, seq);
