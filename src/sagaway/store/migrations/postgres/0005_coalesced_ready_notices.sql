-- Sagaway schema v5 (PostgreSQL): 'ready:' notices carry no time, so PostgreSQL delivers one per
-- transaction however many executions it makes due (it drops a repeated notice of a transaction):
-- a batch of starts no process owns wakes each listener once, not once per start.
CREATE OR REPLACE FUNCTION sagaway_notify() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    channel TEXT := left('sagaway_' || TG_TABLE_SCHEMA, 63);
BEGIN
    IF NEW.status IN ('COMPLETED', 'FAILED', 'CANCELLED', 'TERMINATED') THEN
        IF TG_OP = 'INSERT' OR OLD.status IS DISTINCT FROM NEW.status THEN
            PERFORM pg_notify(channel, 'ended:' || NEW.run_id);
        END IF;
    ELSIF NEW.lease_token IS NULL AND NEW.next_run_at IS NOT NULL AND (
            TG_OP = 'INSERT'
            OR OLD.lease_token IS NOT NULL
            OR OLD.next_run_at IS DISTINCT FROM NEW.next_run_at) THEN
        PERFORM pg_notify(channel, 'ready:');
    END IF;
    RETURN NULL;
END
$$;
