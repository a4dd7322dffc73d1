-- Sagaway schema v19 (PostgreSQL): a process is not told of the ends it made itself.
-- The end of an execution is announced on its lease owner's channel, so that an end made
-- elsewhere (a terminate, a replacement) stops it there. When the owner ends the execution
-- itself, which is how nearly every execution ends, that notice only woke the owner's listener
-- to be ignored. The owner's end statements now name the owner in the transaction-local setting
-- sagaway.ending_owner; the owner's notice is sent only when the owner whose lease ends is not
-- the one ending it. An end made by a process of an older version (the setting unset) is
-- announced as before.
CREATE OR REPLACE FUNCTION sagaway_notify() RETURNS trigger LANGUAGE plpgsql AS $$
-- use: notify_v16_head
            IF TG_OP = 'UPDATE' AND OLD.lease_owner IS NOT NULL
                    AND OLD.lease_owner IS DISTINCT FROM
                        current_setting('sagaway.ending_owner', true) THEN
                -- use: notify_v16_rest
