-- Sagaway schema v9 (SQLite): the trace context of the code that started a workflow (W3C
-- trace context as JSON), so that every process that runs it, after a crash too, reports its
-- spans into one trace. NULL when tracing was off at the start. (PostgreSQL: schema v11.)
ALTER TABLE workflows ADD COLUMN trace_context TEXT;
