-- Sagaway schema v3 (SQLite): workflow queues, so a worker can run only some workflows.
ALTER TABLE workflows ADD COLUMN queue TEXT NOT NULL DEFAULT 'default';
