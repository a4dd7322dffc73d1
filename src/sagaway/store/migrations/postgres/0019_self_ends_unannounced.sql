-- Sagaway schema v19 (PostgreSQL): a process is not told of the ends it made itself.
-- The end of an execution is announced on its lease owner's channel, so that an end made
-- elsewhere (a terminate, a replacement) stops it there. When the owner ends the execution
-- itself, which is how nearly every execution ends, that notice only woke the owner's listener
-- to be ignored. The owner's end statements now name the owner in the transaction-local setting
-- sagaway.ending_owner; the owner's notice is sent only when the owner whose lease ends is not
-- the one ending it. An end made by a process of an older version (the setting unset) is
-- announced as before.
CREATE OR REPLACE FUNCTION sagaway_notify() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    channel TEXT := left('sagaway_' || TG_TABLE_SCHEMA, 63);
    runs TEXT := left('sagaway:runs:' || TG_TABLE_SCHEMA, 63);
BEGIN
    IF NEW.status IN ('COMPLETED', 'FAILED', 'CANCELLED', 'TERMINATED') THEN
        IF TG_OP = 'INSERT' OR OLD.status IS DISTINCT FROM NEW.status THEN
            PERFORM pg_notify(runs, 'ended:' || NEW.run_id);
            IF TG_OP = 'UPDATE' AND OLD.lease_owner IS NOT NULL
                    AND OLD.lease_owner IS DISTINCT FROM
                        current_setting('sagaway.ending_owner', true) THEN
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
