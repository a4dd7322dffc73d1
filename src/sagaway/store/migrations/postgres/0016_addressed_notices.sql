-- Notices go to the processes that care, not to every listener of the schema:
--   'ready:' and 'schedules:'  still on 'sagaway_<schema>' (every worker may take the work);
--   'ended:<run_id>'           to the owner of the lease it ended under (a run terminated elsewhere
--                              stops there) and on 'sagaway:runs:<schema>', which only processes
--                              that wait for another process's end listen to;
--   'cancel:<run_id>'          to the lease owner, and on 'sagaway:runs:<schema>'.
-- An owner's channel is 'sagaway:owner:' || md5(<schema> || '/' || <owner>) (an owner id may be
-- longer than a channel name may be). With 3 workers a workflow's end wakes 1 worker, not 3.
CREATE OR REPLACE FUNCTION sagaway_notify() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    channel TEXT := left('sagaway_' || TG_TABLE_SCHEMA, 63);
    runs TEXT := left('sagaway:runs:' || TG_TABLE_SCHEMA, 63);
BEGIN
    IF NEW.status IN ('COMPLETED', 'FAILED', 'CANCELLED', 'TERMINATED') THEN
        IF TG_OP = 'INSERT' OR OLD.status IS DISTINCT FROM NEW.status THEN
            PERFORM pg_notify(runs, 'ended:' || NEW.run_id);
            IF TG_OP = 'UPDATE' AND OLD.lease_owner IS NOT NULL THEN
                PERFORM pg_notify(
                    'sagaway:owner:' || md5(TG_TABLE_SCHEMA || '/' || OLD.lease_owner),
                    'ended:' || NEW.run_id);
            END IF;
        END IF;
    ELSIF NEW.lease_token IS NULL AND NEW.next_run_at IS NOT NULL AND (
            TG_OP = 'INSERT'
            OR OLD.lease_token IS NOT NULL
            OR OLD.next_run_at IS DISTINCT FROM NEW.next_run_at) THEN
        PERFORM pg_notify(channel, 'ready:');
    ELSIF TG_OP = 'UPDATE' AND NEW.lease_token IS NOT NULL AND NEW.cancel_reason IS NOT NULL
            AND OLD.cancel_reason IS NULL THEN
        PERFORM pg_notify(runs, 'cancel:' || NEW.run_id);
        IF NEW.lease_owner IS NOT NULL THEN
            PERFORM pg_notify(
                'sagaway:owner:' || md5(TG_TABLE_SCHEMA || '/' || NEW.lease_owner),
                'cancel:' || NEW.run_id);
        END IF;
    END IF;
    RETURN NULL;
END
$$;
