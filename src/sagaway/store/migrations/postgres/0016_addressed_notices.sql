-- Notices go to the processes that care, not to every listener of the schema:
--   'ready:' and 'schedules:'  still on 'sagaway_<schema>' (every worker may take the work);
--   'ended:<run_id>'           to the owner of the lease it ended under (a run terminated elsewhere
--                              stops there) and on 'sagaway:runs:<schema>', which only processes
--                              that wait for another process's end listen to;
--   'cancel:<run_id>'          to the lease owner, and on 'sagaway:runs:<schema>'.
-- An owner's channel is 'sagaway:owner:' || md5(<schema> || '/' || <owner>) (an owner id may be
-- longer than a channel name may be). With 3 workers a workflow's end wakes 1 worker, not 3.
CREATE OR REPLACE FUNCTION sagaway_notify() RETURNS trigger LANGUAGE plpgsql AS $$
-- use: notify_v16_head
            IF TG_OP = 'UPDATE' AND OLD.lease_owner IS NOT NULL THEN
                -- use: notify_v16_rest
