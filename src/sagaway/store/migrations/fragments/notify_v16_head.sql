-- sagaway_notify() from schema v16: its variables, and an end announced on the runs channel.
DECLARE
    channel TEXT := left('sagaway_' || TG_TABLE_SCHEMA, 63);
    runs TEXT := left('sagaway:runs:' || TG_TABLE_SCHEMA, 63);
BEGIN
    -- use: notify_ended_when
            PERFORM pg_notify(runs, 'ended:' || NEW.run_id);
