-- Sagaway schema v9 (PostgreSQL): retention (purge of ended executions older than a cutoff).
-- A purge batch reads the oldest ended executions through workflows_ended (ended rows only, so
-- live work never pays for it beyond the one entry written when an execution ends), and removes
-- their signals through signals_run, which is also what the foreign key's check reads when a
-- workflow row is deleted (without it, every deleted row would scan the whole signals table).
CREATE INDEX workflows_ended ON workflows (ended_at)
    WHERE status IN ('COMPLETED', 'FAILED', 'CANCELLED', 'TERMINATED');

CREATE INDEX signals_run ON signals (run_id);
