-- Sagaway schema v21 (PostgreSQL): purge keeps what a live workflow may still read. A workflow
-- reads a child's outcome through the key its child start recorded (a step of kind 'child',
-- its result the key as JSON), whether it created that child, attached to a workflow another
-- one started under the key, or is a fork that kept the start; a purge looks up the live
-- readers of each ended workflow's key through this index of child starts by key. Only child
-- starts are indexed (a write of any other step never touches it). A hash index: a result
-- sealed by a codec before this version may be longer than a B-tree entry can be, and the
-- lookup is by equality only. Building it reads the steps table once, during which writes to
-- it wait. (SQLite: schema v17.)
CREATE INDEX steps_child_key ON steps USING hash (result) WHERE kind = 'child';
