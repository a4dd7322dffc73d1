-- Sagaway schema v3 (PostgreSQL): wake-ups between processes with LISTEN/NOTIFY.
-- A trigger notifies in the writing transaction (delivered at its commit, no extra round trip):
--   'ended:<run_id>'       an execution ended (waiters for its result re-read it)
--   'ready:<next_run_at>'  an execution no one owns can become due (workers rescan)
-- The channel is 'sagaway_<schema>' (cut to 63 bytes). Polling remains the fallback.
CREATE FUNCTION sagaway_notify() RETURNS trigger LANGUAGE plpgsql AS $$
-- use: notify_v3_ended
    -- use: notify_ready_when
        PERFORM pg_notify(channel, 'ready:' || NEW.next_run_at);
    -- use: notify_end

CREATE TRIGGER workflows_notify AFTER INSERT OR UPDATE ON workflows
    FOR EACH ROW EXECUTE FUNCTION sagaway_notify();
