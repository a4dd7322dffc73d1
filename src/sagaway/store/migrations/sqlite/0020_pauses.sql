-- Sagaway schema v20 (SQLite): pausing a workflow, an activity or an activity queue
-- (PostgreSQL: schema v25).
-- workflows.paused_at: set while an operator holds the execution paused. No worker claims it
-- (due_filter); the process that runs it stops before its next durable call and gives its lease
-- and slot up. Resuming clears it and the run is due as it was.
-- paused_calls: activities (kind 'activity', by name) or activity queues (kind 'queue') whose
-- new attempts are held back in every process until resumed; a workflow that reaches one waits
-- (WAITING for 'paused:<kind>:<name>') without using an attempt of its retry policy.
ALTER TABLE workflows ADD COLUMN paused_at REAL;
CREATE TABLE paused_calls (
    kind      TEXT NOT NULL,
    name      TEXT NOT NULL,
    reason    TEXT NOT NULL,
    paused_at REAL NOT NULL,
    PRIMARY KEY (kind, name)
);
