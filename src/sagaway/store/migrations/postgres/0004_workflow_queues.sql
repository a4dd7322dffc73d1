-- Sagaway schema v4 (PostgreSQL): workflow queues, so a worker can run only some workflows.
ALTER TABLE workflows ADD COLUMN queue TEXT NOT NULL DEFAULT 'default';
