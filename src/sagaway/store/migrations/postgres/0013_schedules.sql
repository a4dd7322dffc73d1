-- Sagaway schema v13 (PostgreSQL): schedules, workflows started at the ticks of a cron
-- expression. next_tick_at is the earliest tick not started yet: a scheduler starts the
-- executions of the ticks due and advances it in one transaction, only if it still holds the
-- value it read (compare-and-set), so however many schedulers run, each tick is started once.
-- A trigger notifies 'schedules:' when a schedule may fall due sooner than the schedulers
-- planned (created, resumed, its next tick moved earlier): they look again at once.
-- use: schedules_text_columns
    paused       BOOLEAN NOT NULL DEFAULT FALSE,
    next_tick_at DOUBLE PRECISION NOT NULL,
    created_at   DOUBLE PRECISION NOT NULL,
    updated_at   DOUBLE PRECISION NOT NULL,
    last_tick_at DOUBLE PRECISION
);

CREATE FUNCTION sagaway_notify_schedules() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NOT NEW.paused AND (
            TG_OP = 'INSERT' OR OLD.paused OR NEW.next_tick_at < OLD.next_tick_at) THEN
        PERFORM pg_notify(left('sagaway_' || TG_TABLE_SCHEMA, 63), 'schedules:');
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER schedules_notify AFTER INSERT OR UPDATE ON schedules
    FOR EACH ROW EXECUTE FUNCTION sagaway_notify_schedules();
