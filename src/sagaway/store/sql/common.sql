-- Fragments both dialects' queries use (see ``sagaway.store.sql``): each is written once here
-- and stands where a query of postgres.sql or sqlite.sql says ``-- use: <name>``.

-- fragment: workflow_columns
-- What a WorkflowRecord is read from (_rows.workflow_from_row), in every query that reads one.
run_id, key, name, args, args_hash, status, result, error, parent_key, created_at,
updated_at, ended_at, lease_owner, lease_expires_at, next_run_at, suspend_count, key_space,
cancel_reason, deadline_at, trace_context, code_version, concurrency_key,
ordering_key, ordering_seq, debounce_key,
priority, fairness_key, fairness_weight, fair_pass


-- fragment: inserted_columns
-- What a new execution is inserted with (insert_workflow).
run_id, key, is_current, name, args, args_hash, status, parent_key,
created_at, updated_at, lease_token, lease_owner, lease_expires_at,
next_run_at, queue, key_space, deadline_at, trace_context, code_version,
concurrency_key, concurrency_limit, ordering_key, ordering_seq,
debounce_key, debounce_until, priority, fairness_key,
fairness_weight, fair_pass

-- fragment: forked_columns
-- What a fork is inserted with (fork_workflow: the rest is the source's or the defaults).
run_id, key, is_current, name, args, args_hash, status, parent_key,
created_at, updated_at, lease_token, lease_owner, lease_expires_at,
next_run_at, queue, key_space, code_version, priority, fairness_key,
fairness_weight, fair_pass

-- fragment: waits_before_q
-- A live waiter ``o`` of a cluster queue's line that goes before waiter ``q`` (queue_place):
-- a higher priority, or the same one and waiting since earlier (ties by run and call id),
-- whose workflow is still live; waiters_ahead says the same of a waiter given by parameters.
          AND (o.priority > q.priority
               OR (o.priority = q.priority AND (o.since < q.since
                   OR (o.since = q.since AND (o.run_id, o.call_id) < (q.run_id, q.call_id)))))
          AND EXISTS (SELECT 1 FROM workflows w
                      WHERE w.run_id = o.run_id
                        AND w.status IN ('PENDING', 'RUNNING', 'WAITING'))
