-- The table schedules (both dialects): its creation up to the last of its text columns.
CREATE TABLE schedules (
    id           TEXT PRIMARY KEY,
    workflow     TEXT NOT NULL,
    args         TEXT NOT NULL,
    queue        TEXT NOT NULL,
    cron         TEXT NOT NULL,
    timezone     TEXT NOT NULL,
    catch_up     TEXT NOT NULL,
