-- Sagaway schema v28 (PostgreSQL): debounced starts and per-key order (SQLite: schema v23).
-- workflows.ordering_key / ordering_seq (execute(ordering_key=...)): the executions of one key
-- run one at a time in the order started. ordering_seq is the place in line, one more than the
-- highest of the key's live executions when it was created (only the order among live
-- executions matters); a PENDING execution is claimed only when no live execution of its key
-- has a lower one. The index holds live executions only, so the check reads the line itself,
-- however long the key's history.
-- workflows.debounce_key / debounce_until (execute(debounce_key=..., debounce=...)): a PENDING
-- execution with a debounce key is the open burst of (name, key); a new debounced start
-- postpones it (next_run_at) and gives it its arguments instead of creating another, never
-- beyond debounce_until (the burst's first start + its maximum wait; NULL: no maximum).
-- debounced_starts: the idempotency key of each start folded into a burst, and its execution,
-- so a retried start finds the execution it joined. Concurrent starts of one ordering key or
-- one burst take turns on an advisory lock of the key (until commit).
ALTER TABLE workflows ADD COLUMN ordering_key TEXT COLLATE "C";
ALTER TABLE workflows ADD COLUMN ordering_seq BIGINT;
ALTER TABLE workflows ADD COLUMN debounce_key TEXT COLLATE "C";
ALTER TABLE workflows ADD COLUMN debounce_until DOUBLE PRECISION;
CREATE INDEX workflows_ordering_line ON workflows (ordering_key, ordering_seq)
    WHERE ordering_key IS NOT NULL AND status IN ('PENDING', 'RUNNING', 'WAITING', 'SUSPENDED');
CREATE UNIQUE INDEX workflows_open_burst ON workflows (name, debounce_key)
    WHERE debounce_key IS NOT NULL AND status = 'PENDING';
CREATE TABLE debounced_starts (
    key        TEXT COLLATE "C" PRIMARY KEY,
    run_id     TEXT COLLATE "C" NOT NULL,
    started_at DOUBLE PRECISION NOT NULL
);
CREATE INDEX debounced_starts_run ON debounced_starts (run_id);
