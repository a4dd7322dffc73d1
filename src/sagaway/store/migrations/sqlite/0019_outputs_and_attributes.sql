-- Sagaway schema v19 (SQLite): events, streams and search attributes (PostgreSQL: schema v24).
-- outputs: what a workflow published, in order (seq, per execution, from 1): events (a key's
-- value; the latest row of a key is its value) and stream items (position: the item's place in
-- its stream, from 0). Written with the step of the call that published them, in one
-- transaction, so a replay never writes them again.
-- search_attributes: one row per execution and attribute name, typed (str_value for strings,
-- num_value for ints, floats, bools and datetimes); created_at is the execution's, copied so a
-- filtered listing walks an index in its own order (store/_attributes.py). Both go with their execution (purge).
CREATE TABLE outputs (
    run_id   TEXT NOT NULL REFERENCES workflows (run_id) ON DELETE CASCADE,
    seq      INTEGER NOT NULL,
    kind     TEXT NOT NULL,
    name     TEXT NOT NULL,
    position INTEGER NOT NULL,
    value    TEXT NOT NULL,
    at       REAL NOT NULL,
    PRIMARY KEY (run_id, seq)
) WITHOUT ROWID;
CREATE INDEX outputs_by_name ON outputs (run_id, kind, name, position);
CREATE TABLE search_attributes (
    run_id     TEXT NOT NULL REFERENCES workflows (run_id) ON DELETE CASCADE,
    name       TEXT NOT NULL,
    kind       TEXT NOT NULL,
    str_value  TEXT,
    num_value  REAL,
    created_at REAL NOT NULL,
    PRIMARY KEY (run_id, name)
) WITHOUT ROWID;
CREATE INDEX search_attributes_text
    ON search_attributes (name, str_value, created_at DESC, run_id)
    WHERE str_value IS NOT NULL;
CREATE INDEX search_attributes_number
    ON search_attributes (name, num_value, created_at DESC, run_id)
    WHERE num_value IS NOT NULL;
