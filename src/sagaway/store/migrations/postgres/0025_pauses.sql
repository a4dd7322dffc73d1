-- Sagaway schema v25 (PostgreSQL): pausing a workflow, an activity or an activity queue
-- (SQLite: schema v20).
-- workflows.paused_at: set while an operator holds the execution paused. No worker claims it
-- (due_filter); the process that runs it stops before its next durable call and gives its lease
-- and slot up. Resuming clears it and the run is due as it was (a run that became due while
-- paused gets next_run_at = now, whose change makes the trigger announce it ready).
-- paused_calls: activities (kind 'activity', by name) or activity queues (kind 'queue') whose
-- new attempts are held back in every process until resumed; a workflow that reaches one waits
-- (WAITING for 'paused:<kind>:<name>') without using an attempt of its retry policy.
ALTER TABLE workflows ADD COLUMN paused_at DOUBLE PRECISION;
CREATE TABLE paused_calls (
    kind      TEXT COLLATE "C" NOT NULL,
    name      TEXT COLLATE "C" NOT NULL,
    reason    TEXT NOT NULL,
    paused_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (kind, name)
);
