-- Sagaway schema v14 (SQLite): a workflow's end wakes every workflow waiting for it, not only
-- the parent that created it. Any workflow can wait for a child under a key its code chose,
-- and a second one doing so attaches to the child the first created; the end now finds all of
-- them through this index of waiting executions by what they wait for. (PostgreSQL: schema
-- v17.)
CREATE INDEX workflows_waiting_for ON workflows (waiting_for) WHERE status = 'WAITING';
