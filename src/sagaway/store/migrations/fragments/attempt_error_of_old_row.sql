-- The upsert into attempt_errors of the error a step row held before this write (its old version),
-- both dialects.
    INSERT INTO attempt_errors (run_id, call_id, attempt, error, at)
    VALUES (OLD.run_id, OLD.call_id, OLD.attempts, OLD.error,
            COALESCE(OLD.ended_at, OLD.started_at))
    ON CONFLICT (run_id, call_id, attempt)
