-- SQLite schema v8: a trigger's body that keeps the error of a step's attempt (the last 20).
BEGIN
    -- use: attempt_error_of_new_row
    DO UPDATE SET error = excluded.error, at = excluded.at;
    DELETE FROM attempt_errors
    WHERE run_id = NEW.run_id AND call_id = NEW.call_id AND attempt <= NEW.attempts - 20;
END;
