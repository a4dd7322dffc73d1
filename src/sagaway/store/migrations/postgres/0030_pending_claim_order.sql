-- Sagaway schema v30 (PostgreSQL): workflows_pending_order in the order claims take PENDING
-- starts (priority DESC, fair pass with a start of an earlier version's NULL pass first, due
-- time, run id), so that claim_due reads them from the index and stops at its limit instead
-- of sorting every due start (with 10,000 waiting, every claim read and sorted them all). The
-- new order also serves what the old one did: a level's oldest pass, and start_place's count.
DROP INDEX IF EXISTS workflows_pending_order;
CREATE INDEX workflows_pending_order
    ON workflows (priority DESC, fair_pass NULLS FIRST, next_run_at, run_id)
    WHERE status = 'PENDING';
