-- Sagaway schema v8 (PostgreSQL): cooperative cancellation and workflow deadlines.
--   cancel_reason  set by a cancel request; the workflow sees sagaway.Cancelled at its next
--                  durable call or wait, compensates, and ends CANCELLED
--   deadline_at    when the workflow is cancelled the same way (execute(..., timeout=))
-- A cancel request to an execution leased by a process notifies 'cancel:<run_id>', so that
-- process tells the execution at once instead of at its next heartbeat.
ALTER TABLE workflows ADD COLUMN cancel_reason TEXT;
ALTER TABLE workflows ADD COLUMN deadline_at DOUBLE PRECISION;

CREATE OR REPLACE FUNCTION sagaway_notify() RETURNS trigger LANGUAGE plpgsql AS $$
-- use: notify_v3_ended
    -- use: notify_ready
    ELSIF TG_OP = 'UPDATE' AND NEW.lease_token IS NOT NULL AND NEW.cancel_reason IS NOT NULL
            AND OLD.cancel_reason IS NULL THEN
        PERFORM pg_notify(channel, 'cancel:' || NEW.run_id);
    -- use: notify_end
