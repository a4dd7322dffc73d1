-- sagaway_notify(): the test for an execution no one owns that can become due.
    ELSIF NEW.lease_token IS NULL AND NEW.next_run_at IS NOT NULL AND (
            TG_OP = 'INSERT'
            OR OLD.lease_token IS NOT NULL
            OR OLD.next_run_at IS DISTINCT FROM NEW.next_run_at) THEN
