-- Sagaway schema v6 (PostgreSQL): each execution's idempotency key space.
-- Activity keys are '<key_space>/<call id>' and default child keys '<key_space>/<call id>'. The key
-- space is the workflow key with '%', '/' and '@' escaped (so keys of different workflows and of
-- a parent's calls and its children's never collide), plus '@<run_id>' for an execution started
-- with OnConflict.TERMINATE_EXISTING (a new run under a key never reuses the old run's keys).
-- NULL for executions created before v6: they keep the earlier '<key>/<call id>' keys, so a
-- workflow in flight during the upgrade sends the same keys as before.
ALTER TABLE workflows ADD COLUMN key_space TEXT;
