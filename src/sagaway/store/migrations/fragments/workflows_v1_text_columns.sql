-- The table workflows of schema v1 (both dialects): the text columns of what was started.
    name             TEXT NOT NULL,
    args             TEXT NOT NULL,
    args_hash        TEXT NOT NULL,
    status           TEXT NOT NULL,
    result           TEXT,
    error            TEXT,
    parent_key       TEXT,
