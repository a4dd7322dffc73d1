-- Sagaway schema v23 (PostgreSQL): trigger functions that name tables carry their own path.
-- The store no longer sets search_path on its connections (a pooler in transaction mode hands
-- each transaction any server connection): every statement it sends names the schema of its
-- tables. A trigger function resolves the names in its body with the path of the session it
-- runs in, so the one that names a table keeps the path it is created with: this schema, set
-- for the migration's transaction (FROM CURRENT). sagaway_notify and sagaway_notify_schedules
-- name no table (only built-in functions and TG_TABLE_SCHEMA) and are left as they are: a path
-- on a function is set and reset on every call. A later migration that replaces
-- sagaway_keep_superseded_error (CREATE OR REPLACE drops the setting) must set it again.
ALTER FUNCTION sagaway_keep_superseded_error() SET search_path FROM CURRENT;
