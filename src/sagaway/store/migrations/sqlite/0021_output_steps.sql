-- Sagaway schema v21 (SQLite): which step wrote each published value (PostgreSQL: schema v26).
-- outputs.call_id: the publishing step (call id) that wrote the row. A fork copies the rows of
-- the publish steps it keeps (and only those) into its new run. Rows written before this
-- version are attributed to the run's one publish step that started when they were written
-- (the step's start and the row's time are the same clock reading); a row no single step
-- matches keeps NULL and is not carried over by a fork.
-- attribute_writes: each search attribute a publication set, in order (seq, per execution,
-- from 1), with its step. search_attributes holds only the latest value of each name; a fork
-- rebuilds its own from the writes of the steps it keeps. Attributes set before this version
-- have no writes, and a fork does not carry them over.
ALTER TABLE outputs ADD COLUMN call_id TEXT;
UPDATE outputs SET call_id = (
    SELECT s.call_id FROM steps s
    WHERE s.run_id = outputs.run_id AND s.kind = 'publish' AND s.started_at = outputs.at)
WHERE (SELECT count(*) FROM steps s
       WHERE s.run_id = outputs.run_id AND s.kind = 'publish' AND s.started_at = outputs.at) = 1;
CREATE TABLE attribute_writes (
    run_id    TEXT NOT NULL REFERENCES workflows (run_id) ON DELETE CASCADE,
    seq       INTEGER NOT NULL,
    call_id   TEXT NOT NULL,
    name      TEXT NOT NULL,
    kind      TEXT NOT NULL,
    str_value TEXT,
    num_value REAL,
    PRIMARY KEY (run_id, seq)
) WITHOUT ROWID;
