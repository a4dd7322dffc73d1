-- Sagaway schema v29 (PostgreSQL): strict admission order of cluster-wide activity queues
-- (SQLite: schema v24). One row per activity call refused a slot or a start of a queue (the
-- call: its run and call id), with its priority, when it first asked and an expiry each ask
-- pushes forward. A slot or a start goes only to the first waiter by priority (higher first),
-- then by waiting time; the row goes when the call is admitted, at its expiry (its process
-- died) or is passed over at once once its workflow is no longer live. Admissions still take
-- turns on the queue's queue_limits row.
CREATE TABLE queue_waiters (
    queue      TEXT COLLATE "C" NOT NULL,
    run_id     TEXT COLLATE "C" NOT NULL,
    call_id    TEXT COLLATE "C" NOT NULL,
    priority   INTEGER NOT NULL,
    since      DOUBLE PRECISION NOT NULL,
    expires_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (queue, run_id, call_id)
);
CREATE INDEX queue_waiters_order ON queue_waiters (queue, priority DESC, since, run_id, call_id);
CREATE INDEX queue_waiters_run ON queue_waiters (run_id);  -- a run's place (describe)
