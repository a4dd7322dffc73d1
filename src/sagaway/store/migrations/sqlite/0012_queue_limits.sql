-- Sagaway schema v12 (SQLite): limits of activity queues shared by every process
-- (sagaway.Queue(scope="cluster")). One row per queue holds when its next start may come (the
-- rate, starts 1/rate apart); a slot row per admitted attempt holds its place until released
-- or until it expires (a crashed holder's slot frees itself). Admissions are serialised by
-- SQLite's one writer. (PostgreSQL: schema v14.)
CREATE TABLE queue_limits (
    queue         TEXT PRIMARY KEY,
    next_start_at REAL NOT NULL DEFAULT 0
);
CREATE TABLE queue_slots (
    queue      TEXT NOT NULL,
    holder     TEXT NOT NULL,
    expires_at REAL NOT NULL,
    PRIMARY KEY (queue, holder)
);
