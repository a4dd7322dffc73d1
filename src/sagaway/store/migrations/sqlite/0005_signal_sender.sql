-- Sagaway schema v5 (SQLite): who stored each signal, as on PostgreSQL (its schema v7), where a
-- send retried after a lost acknowledgement recognises its own row by this token. A local
-- SQLite commit has no acknowledgement to lose; the column keeps the two schemas alike.
ALTER TABLE signals ADD COLUMN sender TEXT;
