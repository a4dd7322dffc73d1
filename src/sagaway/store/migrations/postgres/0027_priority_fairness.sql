-- Sagaway schema v27 (PostgreSQL): priority and fairness of workflow starts (SQLite: schema v22).
-- priority: 1 (lowest) .. 5 (highest), 3 by default; claims take higher levels first.
-- fairness_key, fairness_weight: the tenant a start is counted for ('' : none) and its share.
-- fair_pass: a PENDING start's place in start-time fair queueing (one queue per level), given
-- when it is created: the larger of its level's oldest PENDING pass and its key's last PENDING
-- pass of the level, plus 1/weight. Claims take the due work of started executions first
-- (timers, retries, wake-ups, expired leases keep their place), then PENDING starts by
-- priority (higher first), pass, next_run_at. A start left PENDING by an earlier version has
-- no pass: it goes first among the starts of its level.
ALTER TABLE workflows ADD COLUMN priority INTEGER NOT NULL DEFAULT 3;
ALTER TABLE workflows ADD COLUMN fairness_key TEXT COLLATE "C" NOT NULL DEFAULT '';
ALTER TABLE workflows ADD COLUMN fairness_weight DOUBLE PRECISION NOT NULL DEFAULT 1;
ALTER TABLE workflows ADD COLUMN fair_pass DOUBLE PRECISION;
-- The order claims take PENDING starts in, cut at their limit (and each level's oldest pass);
-- each key's last pass of a level.
CREATE INDEX workflows_pending_order ON workflows (priority DESC, fair_pass, next_run_at)
    WHERE status = 'PENDING';
CREATE INDEX workflows_pending_fairness ON workflows (priority, fairness_key, fair_pass)
    WHERE status = 'PENDING';
