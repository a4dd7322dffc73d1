-- sagaway_notify() of schema v3 to v15: one channel, and an end announced on it.
DECLARE
    channel TEXT := left('sagaway_' || TG_TABLE_SCHEMA, 63);
BEGIN
    -- use: notify_ended_when
            PERFORM pg_notify(channel, 'ended:' || NEW.run_id);
        END IF;
