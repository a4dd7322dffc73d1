-- Sagaway schema v15 (PostgreSQL): listings stay fast however long the history grows. A
-- listing filtered by an ended status reads that status's executions newest first from its own
-- index, and one filtered by name reads that name's; before, a rare status or name walked (or
-- scanned) every execution ever created. The ended-status index gains an entry when an
-- execution ends, the name index when one is created. Building them takes a few seconds per
-- million executions, during which writes to the table wait. (SQLite: schema v13.)
CREATE INDEX workflows_ended_by_status ON workflows (status, created_at DESC, run_id)
    WHERE is_current AND status IN ('COMPLETED', 'FAILED', 'CANCELLED', 'TERMINATED');
CREATE INDEX workflows_by_name ON workflows (name, created_at DESC, run_id)
    WHERE is_current;
