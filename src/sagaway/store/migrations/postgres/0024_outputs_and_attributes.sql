-- Sagaway schema v24 (PostgreSQL): events, streams and search attributes (SQLite: schema v19).
-- outputs: what a workflow published, in order (seq, per execution, from 1): events (a key's
-- value; the latest row of a key is its value) and stream items (position: the item's place in
-- its stream, from 0). Written with the step of the call that published them, in one
-- transaction, so a replay never writes them again. Each insert announces
-- 'published:<run_id>' on the channel of every run's ends and cancels (the processes waiting
-- for another's runs listen to it; PostgreSQL sends one per transaction).
-- search_attributes: one row per execution and attribute name, typed (str_value for strings,
-- num_value for ints, floats, bools and datetimes); created_at is the execution's, copied so a
-- filtered listing walks an index in its own order (store/_attributes.py). Both go with their execution (purge).
CREATE TABLE outputs (
    run_id   TEXT COLLATE "C" NOT NULL REFERENCES workflows (run_id) ON DELETE CASCADE,
    seq      BIGINT NOT NULL,
    kind     TEXT COLLATE "C" NOT NULL,
    name     TEXT COLLATE "C" NOT NULL,
    position BIGINT NOT NULL,
    value    TEXT NOT NULL,
    at       DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (run_id, seq)
);
CREATE INDEX outputs_by_name ON outputs (run_id, kind, name, position);
CREATE TABLE search_attributes (
    run_id     TEXT COLLATE "C" NOT NULL REFERENCES workflows (run_id) ON DELETE CASCADE,
    name       TEXT COLLATE "C" NOT NULL,
    kind       TEXT COLLATE "C" NOT NULL,
    str_value  TEXT COLLATE "C",
    num_value  DOUBLE PRECISION,
    created_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (run_id, name)
);
CREATE INDEX search_attributes_text
    ON search_attributes (name, str_value, created_at DESC, run_id)
    WHERE str_value IS NOT NULL;
CREATE INDEX search_attributes_number
    ON search_attributes (name, num_value, created_at DESC, run_id)
    WHERE num_value IS NOT NULL;
CREATE FUNCTION sagaway_notify_published() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify(left('sagaway:runs:' || TG_TABLE_SCHEMA, 63), 'published:' || NEW.run_id);
    RETURN NULL;
END
$$;
CREATE TRIGGER outputs_published AFTER INSERT ON outputs
    FOR EACH ROW EXECUTE FUNCTION sagaway_notify_published();
