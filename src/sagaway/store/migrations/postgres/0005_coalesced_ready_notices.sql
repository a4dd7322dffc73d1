-- Sagaway schema v5 (PostgreSQL): 'ready:' notices carry no time, so PostgreSQL delivers one per
-- transaction however many executions it makes due (it drops a repeated notice of a transaction):
-- a batch of starts no process owns wakes each listener once, not once per start.
CREATE OR REPLACE FUNCTION sagaway_notify() RETURNS trigger LANGUAGE plpgsql AS $$
-- use: notify_v3_ended
    -- use: notify_ready
    -- use: notify_end
