-- Sagaway schema v7 (SQLite): retention, as on PostgreSQL (its schema v9). A purge batch reads
-- the oldest ended executions through workflows_ended and removes their signals through
-- signals_run (also what the foreign key's check reads when a workflow row is deleted).
CREATE INDEX workflows_ended ON workflows (ended_at)
    WHERE status IN ('COMPLETED', 'FAILED', 'CANCELLED', 'TERMINATED');

CREATE INDEX signals_run ON signals (run_id);
