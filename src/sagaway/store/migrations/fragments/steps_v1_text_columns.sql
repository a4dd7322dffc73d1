-- The table steps of schema v1 (both dialects): what a step is and its outcome.
    kind       TEXT NOT NULL,
    name       TEXT NOT NULL,
    status     TEXT NOT NULL,
    attempts   INTEGER NOT NULL,
    result     TEXT,
    error      TEXT,
