-- Sagaway schema v11 (SQLite): schedules, workflows started at the ticks of a cron expression.
-- next_tick_at is the earliest tick not started yet: a scheduler starts the executions of the
-- ticks due and advances it in one transaction, only if it still holds the value it read
-- (compare-and-set), so however many schedulers run, each tick is started once.
-- (PostgreSQL: schema v13.)
-- use: schedules_text_columns
    paused       INTEGER NOT NULL DEFAULT 0,
    next_tick_at REAL NOT NULL,
    created_at   REAL NOT NULL,
    updated_at   REAL NOT NULL,
    last_tick_at REAL
);
