-- Sagaway schema v10 (SQLite): the version of the application code whose process created an
-- execution (Manager(version=...)), so that workers given a set of versions claim only those
-- (blue/green deploys). NULL: unversioned, as is every execution created before. (PostgreSQL:
-- schema v12.)
ALTER TABLE workflows ADD COLUMN code_version TEXT;
