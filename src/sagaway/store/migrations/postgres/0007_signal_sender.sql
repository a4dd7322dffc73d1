-- Sagaway schema v7 (PostgreSQL): who stored each signal. Every send picks a token once for all
-- its attempts; a send retried after its commit's acknowledgement was lost finds its own row by
-- that token, instead of taking it for an earlier send with the same dedupe_id.
ALTER TABLE signals ADD COLUMN sender TEXT;
