-- Sagaway schema v17 (SQLite): purge keeps what a live workflow may still read. A workflow
-- reads a child's outcome through the key its child start recorded (a step of kind 'child',
-- its result the key as JSON), whether it created that child, attached to a workflow another
-- one started under the key, or is a fork that kept the start; a purge looks up the live
-- readers of each ended workflow's key through this index of child starts by key. Only child
-- starts are indexed (a write of any other step never touches it). (PostgreSQL: schema v21.)
CREATE INDEX steps_child_key ON steps (result) WHERE kind = 'child';
