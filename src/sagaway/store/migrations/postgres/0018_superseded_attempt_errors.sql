-- Sagaway schema v18 (PostgreSQL): a failed attempt's error is written once, in the step row.
-- Until now every write of a step with an error also copied that error into attempt_errors. A
-- step row already holds the error of its latest attempt, so attempt_errors now keeps only the
-- errors the step row no longer holds: when a step is written again for a later attempt (or
-- without an error), the error of the attempt it held moves there. Reading a step's attempts
-- joins the two; rows written before this version for the attempt the step still holds are left
-- out of that read, so nothing is listed twice. As before, the errors of the last 20 failed
-- attempts of a step are kept. (SQLite: schema v15.)
DROP TRIGGER IF EXISTS steps_keep_attempt_error ON steps;
DROP FUNCTION IF EXISTS sagaway_keep_attempt_error();
DROP TRIGGER IF EXISTS steps_keep_superseded_error ON steps;

CREATE OR REPLACE FUNCTION sagaway_keep_superseded_error() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- use: attempt_error_of_old_row
    DO UPDATE SET error = EXCLUDED.error, at = EXCLUDED.at;
    IF NEW.attempts > 20 THEN
        DELETE FROM attempt_errors
        WHERE run_id = NEW.run_id AND call_id = NEW.call_id
          AND attempt <= NEW.attempts - CASE WHEN NEW.error IS NULL THEN 21 ELSE 20 END;
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER steps_keep_superseded_error AFTER UPDATE ON steps
    FOR EACH ROW
    WHEN (OLD.error IS NOT NULL AND (NEW.error IS NULL OR OLD.attempts <> NEW.attempts))
    EXECUTE FUNCTION sagaway_keep_superseded_error();
