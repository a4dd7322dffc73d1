-- Sagaway schema v22 (SQLite): priority and fairness of workflow starts (PostgreSQL: schema v27).
-- priority: 1 (lowest) .. 5 (highest), 3 by default; claims take higher levels first.
-- fairness_key, fairness_weight: the tenant a start is counted for ('' : none) and its share.
-- fair_pass: a PENDING start's place in start-time fair queueing, given when it is created:
-- the larger of the oldest PENDING start's pass and its key's last PENDING pass, plus 1/weight.
-- Claims order by priority (higher first), then a PENDING start by its pass after the other due
-- work (timers, retries, wake-ups, expired leases keep their place), then next_run_at. A start
-- left PENDING by an earlier version has no pass: it goes first among the starts of its level.
ALTER TABLE workflows ADD COLUMN priority INTEGER NOT NULL DEFAULT 3;
ALTER TABLE workflows ADD COLUMN fairness_key TEXT NOT NULL DEFAULT '';
ALTER TABLE workflows ADD COLUMN fairness_weight REAL NOT NULL DEFAULT 1;
ALTER TABLE workflows ADD COLUMN fair_pass REAL;
CREATE INDEX workflows_pending_pass ON workflows (fair_pass) WHERE status = 'PENDING';
CREATE INDEX workflows_pending_fairness ON workflows (fairness_key, fair_pass)
    WHERE status = 'PENDING';
