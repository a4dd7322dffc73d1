-- Sagaway schema v13 (SQLite): listings stay fast however long the history grows. A listing
-- filtered by an ended status reads that status's executions newest first from its own index,
-- and one filtered by name reads that name's; before, a rare status or name walked every
-- execution ever created. The ended-status index gains an entry when an execution ends, the
-- name index when one is created. (PostgreSQL: schema v15.)
CREATE INDEX workflows_ended_by_status ON workflows (status, created_at DESC, run_id)
    WHERE is_current = 1 AND status IN ('COMPLETED', 'FAILED', 'CANCELLED', 'TERMINATED');
CREATE INDEX workflows_by_name ON workflows (name, created_at DESC, run_id)
    WHERE is_current = 1;
