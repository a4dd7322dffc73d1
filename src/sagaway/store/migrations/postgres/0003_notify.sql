-- Sagaway schema v3 (PostgreSQL): wake-ups between processes with LISTEN/NOTIFY.
-- A trigger notifies in the writing transaction (delivered at its commit, no extra round trip):
--   'ended:<run_id>'       an execution ended (waiters for its result re-read it)
--   'ready:<next_run_at>'  an execution no one owns can become due (workers rescan)
-- The channel is 'sagaway_<schema>' (cut to 63 bytes). Polling remains the fallback.
CREATE FUNCTION sagaway_notify() RETURNS trigger LANGUAGE plpgsql AS $$
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
        PERFORM pg_notify(channel, 'ready:' || NEW.next_run_at);
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER workflows_notify AFTER INSERT OR UPDATE ON workflows
    FOR EACH ROW EXECUTE FUNCTION sagaway_notify();
