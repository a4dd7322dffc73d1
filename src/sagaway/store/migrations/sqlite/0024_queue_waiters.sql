-- Sagaway schema v24 (SQLite): strict admission order of cluster-wide activity queues
-- (PostgreSQL: schema v29). One row per activity call refused a slot or a start of a queue
-- (the call: its run and call id), with its priority, when it first asked and an expiry each
-- ask pushes forward. A slot or a start goes only to the first waiter by priority (higher
-- first), then by waiting time; the row goes when the call is admitted, at its expiry (its
-- process died) or is passed over at once once its workflow is no longer live.
CREATE TABLE queue_waiters (
    queue      TEXT NOT NULL,
    run_id     TEXT NOT NULL,
    call_id    TEXT NOT NULL,
    priority   INTEGER NOT NULL,
    since      REAL NOT NULL,
    expires_at REAL NOT NULL,
    PRIMARY KEY (queue, run_id, call_id)
);
CREATE INDEX queue_waiters_order ON queue_waiters (queue, priority DESC, since, run_id, call_id);
CREATE INDEX queue_waiters_run ON queue_waiters (run_id);  -- a run's place (describe)
