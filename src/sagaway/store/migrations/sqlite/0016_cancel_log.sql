-- Sagaway schema v16 (SQLite): every cancel request, accepted or not (PostgreSQL: schema v20).
-- workflows.cancel_reason keeps the first accepted request's reason (the one delivered); this
-- log keeps each request: its reason, when it came, and whether it was accepted (False: the
-- workflow had already ended). Where it was delivered is its workflow's cancel step; `show`
-- and the console put the two together. Rows go with their workflow (purge).
CREATE TABLE cancel_requests (
    seq          INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id       TEXT NOT NULL REFERENCES workflows (run_id) ON DELETE CASCADE,
    reason       TEXT NOT NULL,
    requested_at REAL NOT NULL,
    accepted     INTEGER NOT NULL
);
CREATE INDEX cancel_requests_by_run ON cancel_requests (run_id, seq);
