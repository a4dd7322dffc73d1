-- Sagaway schema v10 (PostgreSQL): the error of every failed attempt of a step, not only the
-- last. A step row keeps the error of its latest attempt; each write of a step with an error
-- copies that error here, keyed by the attempt number, in the writing transaction. Steps written
-- without an error (every successful attempt) do not fire the trigger, so a step that succeeds
-- costs what it did. The last 20 attempts of a step are kept (a compensation retries without
-- limit); rows go with their step (ON DELETE CASCADE).
CREATE TABLE attempt_errors (
    run_id  TEXT COLLATE "C" NOT NULL,
    call_id TEXT COLLATE "C" NOT NULL,
    attempt INTEGER NOT NULL,
    error   TEXT NOT NULL,
    at      DOUBLE PRECISION,
    PRIMARY KEY (run_id, call_id, attempt),
    FOREIGN KEY (run_id, call_id) REFERENCES steps (run_id, call_id) ON DELETE CASCADE
);

CREATE FUNCTION sagaway_keep_attempt_error() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- use: attempt_error_of_new_row
    DO UPDATE SET error = EXCLUDED.error, at = EXCLUDED.at;
    IF NEW.attempts > 20 THEN
        DELETE FROM attempt_errors
        WHERE run_id = NEW.run_id AND call_id = NEW.call_id AND attempt <= NEW.attempts - 20;
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER steps_keep_attempt_error AFTER INSERT OR UPDATE ON steps
    FOR EACH ROW WHEN (NEW.error IS NOT NULL) EXECUTE FUNCTION sagaway_keep_attempt_error();
