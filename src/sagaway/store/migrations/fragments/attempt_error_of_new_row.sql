-- The upsert into attempt_errors of the error a step row now holds (its new version), both dialects.
    INSERT INTO attempt_errors (run_id, call_id, attempt, error, at)
    VALUES (NEW.run_id, NEW.call_id, NEW.attempts, NEW.error,
            COALESCE(NEW.ended_at, NEW.started_at))
    ON CONFLICT (run_id, call_id, attempt)
