-- Sagaway schema v26 (PostgreSQL): which step wrote each published value (SQLite: schema v21).
-- outputs.call_id: the publishing step (call id) that wrote the row. A fork copies the rows of
-- the publish steps it keeps (and only those) into its new run. Rows written before this
-- version are attributed to the run's one publish step that started when they were written
-- (the step's start and the row's time are the same clock reading); a row no single step
-- matches keeps NULL and is not carried over by a fork.
-- attribute_writes: each search attribute a publication set, in order (seq, per execution,
-- from 1), with its step. search_attributes holds only the latest value of each name; a fork
-- rebuilds its own from the writes of the steps it keeps. Attributes set before this version
-- have no writes, and a fork does not carry them over.
ALTER TABLE outputs ADD COLUMN call_id TEXT COLLATE "C";
UPDATE outputs SET call_id = m.call_id
FROM (
    SELECT o.run_id, o.seq, min(s.call_id) AS call_id FROM outputs o
    JOIN steps s ON s.run_id = o.run_id AND s.kind = 'publish' AND s.started_at = o.at
    GROUP BY o.run_id, o.seq
    HAVING count(*) = 1
) m
WHERE outputs.run_id = m.run_id AND outputs.seq = m.seq;
CREATE TABLE attribute_writes (
    run_id    TEXT COLLATE "C" NOT NULL REFERENCES workflows (run_id) ON DELETE CASCADE,
    seq       BIGINT NOT NULL,
    call_id   TEXT COLLATE "C" NOT NULL,
    name      TEXT COLLATE "C" NOT NULL,
    kind      TEXT COLLATE "C" NOT NULL,
    str_value TEXT COLLATE "C",
    num_value DOUBLE PRECISION,
    PRIMARY KEY (run_id, seq)
);
