-- Sagaway schema v11 (PostgreSQL): the trace context of the code that started a workflow
-- (W3C trace context as JSON), so that every process that runs it, after a crash too, reports
-- its spans into one trace. NULL when tracing was off at the start.
ALTER TABLE workflows ADD COLUMN trace_context TEXT;
