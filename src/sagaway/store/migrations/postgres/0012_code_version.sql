-- Sagaway schema v12 (PostgreSQL): the version of the application code whose process created
-- an execution (Manager(version=...)), so that workers given a set of versions claim only
-- those (blue/green deploys). NULL: unversioned, as is every execution created before.
ALTER TABLE workflows ADD COLUMN code_version TEXT;
