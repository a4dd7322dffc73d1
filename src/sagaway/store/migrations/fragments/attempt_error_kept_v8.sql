-- SQLite schema v8: a trigger's body that keeps the error of a step's attempt (the last 20).
BEGIN
    INSERT INTO attempt_errors (run_id, call_id, attempt, error, at)
    VALUES (NEW.run_id, NEW.call_id, NEW.attempts, NEW.error,
            COALESCE(NEW.ended_at, NEW.started_at))
    ON CONFLICT (run_id, call_id, attempt)
    DO UPDATE SET error = excluded.error, at = excluded.at;
    DELETE FROM attempt_errors
    WHERE run_id = NEW.run_id AND call_id = NEW.call_id AND attempt <= NEW.attempts - 20;
END;
