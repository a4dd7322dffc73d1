-- Sagaway schema v6 (SQLite): cooperative cancellation and workflow deadlines, as on PostgreSQL
-- (its schema v8). cancel_reason is set by a cancel request: the workflow sees
-- sagaway.Cancelled at its next durable call or wait, compensates, and ends CANCELLED.
-- deadline_at is when it is cancelled the same way (execute(..., timeout=)).
ALTER TABLE workflows ADD COLUMN cancel_reason TEXT;
ALTER TABLE workflows ADD COLUMN deadline_at REAL;
