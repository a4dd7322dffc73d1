-- Sagaway schema v14 (PostgreSQL): limits of activity queues shared by every process
-- (sagaway.Queue(scope="cluster")). One row per queue holds when its next start may come (the
-- rate, starts 1/rate apart) and is the lock that serialises admissions to the queue; a slot
-- row per admitted attempt holds its place until released or until it expires (a crashed
-- holder's slot frees itself).
CREATE TABLE queue_limits (
    queue         TEXT COLLATE "C" PRIMARY KEY,
    next_start_at DOUBLE PRECISION NOT NULL DEFAULT 0
);
CREATE TABLE queue_slots (
    queue      TEXT COLLATE "C" NOT NULL,
    holder     TEXT COLLATE "C" NOT NULL,
    expires_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (queue, holder)
);

-- Per-key limits of workflows (execute(concurrency_key=...), register_workflow(max_per_key=)):
-- a PENDING execution with a key is claimed only while fewer than its limit of the key's
-- executions run (RUNNING, WAITING, SUSPENDED). NULL: no key, as every execution before.
ALTER TABLE workflows ADD COLUMN concurrency_key TEXT COLLATE "C";
ALTER TABLE workflows ADD COLUMN concurrency_limit INTEGER;
CREATE INDEX workflows_concurrency_key ON workflows (concurrency_key, status)
    WHERE concurrency_key IS NOT NULL;
