-- sagaway_notify() from schema v16, after the test of the lease owner told of an end: the owner's
-- notice of the end, 'ready:' and the cancel notices (to the runs channel and the lease owner).
                PERFORM pg_notify(
                    'sagaway:owner:' || md5(TG_TABLE_SCHEMA || '/' || OLD.lease_owner),
                    'ended:' || NEW.run_id);
            END IF;
        END IF;
    -- use: notify_ready
    ELSIF TG_OP = 'UPDATE' AND NEW.lease_token IS NOT NULL AND NEW.cancel_reason IS NOT NULL
            AND OLD.cancel_reason IS NULL THEN
        PERFORM pg_notify(runs, 'cancel:' || NEW.run_id);
        IF NEW.lease_owner IS NOT NULL THEN
            PERFORM pg_notify(
                'sagaway:owner:' || md5(TG_TABLE_SCHEMA || '/' || NEW.lease_owner),
                'cancel:' || NEW.run_id);
        END IF;
    -- use: notify_end
