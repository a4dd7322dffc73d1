-- Sagaway schema v15 (SQLite): a failed attempt's error is written once, in the step row.
-- Until now every write of a step with an error also copied that error into attempt_errors, and
-- the trigger that did so ran on every step write, with an error or not. A step row already holds
-- the error of its latest attempt, so attempt_errors now keeps only the errors the step row no
-- longer holds: when a step is written again for a later attempt (or without an error), the
-- error of the attempt it held moves there. Reading a step's attempts joins the two; rows
-- written before this version for the attempt the step still holds are left out of that read,
-- so nothing is listed twice. As before, the errors of the last 20 failed attempts of a step
-- are kept.
-- (PostgreSQL: schema v18.)
DROP TRIGGER IF EXISTS steps_keep_attempt_error_insert;
DROP TRIGGER IF EXISTS steps_keep_attempt_error_update;

CREATE TRIGGER IF NOT EXISTS steps_keep_superseded_error AFTER UPDATE ON steps
WHEN OLD.error IS NOT NULL AND (NEW.error IS NULL OR OLD.attempts <> NEW.attempts)
BEGIN
    -- use: attempt_error_of_old_row
    DO UPDATE SET error = excluded.error, at = excluded.at;
    DELETE FROM attempt_errors
    WHERE run_id = NEW.run_id AND call_id = NEW.call_id
      AND attempt <= NEW.attempts - 20 - (NEW.error IS NULL);
END;
