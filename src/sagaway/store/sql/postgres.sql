-- PostgreSQL dialect. Tables are named unqualified here; the store's connections qualify them
-- with its schema as each statement is sent (store/postgres/qualify.py: no search_path is set).
-- Parameters are %(name)s placeholders bound by psycopg (server-side binding).

-- ---------------------------------------------------------------- migrations

-- name: migration_lock
SELECT pg_advisory_xact_lock(%(lock_key)s::bigint)

-- name: schema_exists
SELECT 1 FROM pg_catalog.pg_namespace WHERE nspname = %(schema)s

-- name: create_schema_migrations
CREATE TABLE IF NOT EXISTS schema_migrations (
    version    INTEGER PRIMARY KEY,
    name       TEXT NOT NULL,
    applied_at DOUBLE PRECISION NOT NULL
)

-- name: schema_version
SELECT COALESCE(MAX(version), 0) FROM schema_migrations

-- name: record_migration
INSERT INTO schema_migrations (version, name, applied_at)
VALUES (%(version)s, %(name)s, %(applied_at)s)

-- ---------------------------------------------------------------- workflows

-- name: get_current
SELECT
       -- use: workflow_columns
FROM workflows WHERE key = %(key)s AND is_current

-- name: get_current_for_update
SELECT
       -- use: workflow_columns
FROM workflows WHERE key = %(key)s AND is_current
FOR UPDATE

-- name: get_run
SELECT
       -- use: workflow_columns
FROM workflows WHERE run_id = %(run_id)s

-- name: insert_workflow
-- The key space is %(spare_key_space)s when current executions are kept under keys derived from
-- %(key_space)s ('<key space>/...', the range up to '<key space>0', byte-wise): children a purged
-- execution under this key left behind, which the new one's calls must not join
-- (_params.spare_key_space).
INSERT INTO workflows (
    -- use: inserted_columns
)
VALUES (%(run_id)s, %(key)s, TRUE, %(name)s, %(args)s, %(args_hash)s, %(status)s, %(parent_key)s,
        %(now)s, %(now)s, %(lease_token)s, %(lease_owner)s, %(lease_expires_at)s,
        %(start_at)s,
        %(queue)s,
        CASE WHEN %(spare_key_space)s::text IS NOT NULL AND EXISTS (
                SELECT 1 FROM workflows c
                WHERE c.is_current
                  AND c.key >= (%(key_space)s::text || '/') COLLATE "C"
                  AND c.key < (%(key_space)s::text || '0') COLLATE "C")
             THEN %(spare_key_space)s::text ELSE %(key_space)s::text END,
        %(deadline_at)s, %(trace_context)s, %(code_version)s,
        %(concurrency_key)s, %(concurrency_limit)s, %(ordering_key)s,
        CASE WHEN %(ordering_key)s::text IS NOT NULL THEN 1 + COALESCE((
            SELECT MAX(o.ordering_seq) FROM workflows AS o
            WHERE o.ordering_key = %(ordering_key)s::text AND o.ordering_key IS NOT NULL
              AND o.status IN ('PENDING', 'RUNNING', 'WAITING', 'SUSPENDED')), 0) END,
        %(debounce_key)s, %(debounce_until)s,
        %(priority)s, %(fairness_key)s,
        %(fairness_weight)s,
        CASE WHEN %(status)s = 'PENDING' THEN
            GREATEST(
                (SELECT MIN(p.fair_pass) FROM workflows AS p
                 WHERE p.status = 'PENDING' AND p.priority = %(priority)s
                   AND p.fair_pass IS NOT NULL),
                (SELECT MAX(f.fair_pass) FROM workflows AS f
                 WHERE f.status = 'PENDING' AND f.priority = %(priority)s
                   AND f.fairness_key = %(fairness_key)s),
                0)
            + 1.0 / %(fairness_weight)s::double precision
        END)
ON CONFLICT (key) WHERE is_current DO NOTHING
RETURNING
       -- use: workflow_columns

-- name: insert_workflows
-- insert_workflow for many executions at once (group commit of starts): one JSON parameter.
-- A key already taken (or taken twice in the batch) inserts nothing and returns no row.
-- The fair passes of a key's PENDING starts of a level in one batch follow each other in batch
-- order (the pass: insert_workflow).
INSERT INTO workflows (run_id, key, is_current, name, args, args_hash, status, parent_key,
                       created_at, updated_at, lease_token, lease_owner, lease_expires_at,
                       next_run_at, queue, key_space, deadline_at, trace_context, code_version,
                       concurrency_key, concurrency_limit, priority, fairness_key, fairness_weight,
                       fair_pass)
SELECT run_id, key, TRUE, name, args, args_hash, status, parent_key, now, now, lease_token,
       lease_owner, lease_expires_at, now, queue,
       CASE WHEN i.spare_key_space IS NOT NULL AND EXISTS (
               SELECT 1 FROM workflows c
               WHERE c.is_current
                 AND c.key >= (i.key_space || '/') COLLATE "C"
                 AND c.key < (i.key_space || '0') COLLATE "C")
            THEN i.spare_key_space ELSE i.key_space END,
       deadline_at, trace_context, code_version, concurrency_key, concurrency_limit,
       priority, fairness_key, fairness_weight,
       CASE WHEN status = 'PENDING' THEN
           GREATEST(
               (SELECT MIN(p.fair_pass) FROM workflows AS p
                WHERE p.status = 'PENDING' AND p.priority = i.priority
                  AND p.fair_pass IS NOT NULL),
               (SELECT MAX(f.fair_pass) FROM workflows AS f
                WHERE f.status = 'PENDING' AND f.priority = i.priority
                  AND f.fairness_key = i.fairness_key),
               0)
           + sum(1.0 / fairness_weight) FILTER (WHERE status = 'PENDING')
                 OVER (PARTITION BY priority, fairness_key ORDER BY ord)
       END
FROM ROWS FROM (json_to_recordset(%(batch)s::json)
    AS (run_id text, key text, name text, args text, args_hash text, status text,
        parent_key text, now double precision, lease_token text, lease_owner text,
        lease_expires_at double precision, queue text, key_space text, spare_key_space text,
        deadline_at double precision, trace_context text, code_version text,
        concurrency_key text, concurrency_limit integer, priority integer, fairness_key text,
        fairness_weight double precision))
    WITH ORDINALITY
    AS i (run_id, key, name, args, args_hash, status, parent_key, now, lease_token, lease_owner,
          lease_expires_at, queue, key_space, spare_key_space, deadline_at, trace_context,
          code_version, concurrency_key, concurrency_limit, priority, fairness_key,
          fairness_weight, ord)
ON CONFLICT (key) WHERE is_current DO NOTHING
RETURNING
       -- use: workflow_columns

-- ---------------------------------------------------------------- debounced starts and order

-- name: lock_start_key
-- Starts of one ordering key, or of one debounced burst, take turns (until commit): each sees
-- what the one before it wrote (the key's line, the open burst).
SELECT pg_advisory_xact_lock(hashtextextended(%(lock_key)s, 0))

-- name: debounced_start
-- The execution a start with this idempotency key was folded into (a retried start).
SELECT run_id FROM debounced_starts WHERE key = %(key)s

-- name: open_burst
-- The open burst of a debounced start: its workflow's PENDING execution of the key.
SELECT run_id, created_at, debounce_until FROM workflows
WHERE name = %(name)s AND debounce_key = %(debounce_key)s AND debounce_key IS NOT NULL
  AND status = 'PENDING'
FOR UPDATE

-- name: postpone_burst
-- A start folded into the open burst: its arguments, and the start postponed.
UPDATE workflows
SET args = %(args)s, args_hash = %(args_hash)s, next_run_at = %(start_at)s,
    debounce_until = %(debounce_until)s, updated_at = %(now)s
WHERE run_id = %(run_id)s AND status = 'PENDING'
RETURNING
       -- use: workflow_columns

-- name: record_debounced_start
INSERT INTO debounced_starts (key, run_id, started_at) VALUES (%(key)s, %(run_id)s, %(now)s)
ON CONFLICT (key) DO NOTHING

-- name: ordering_line
-- The live executions of an ordering key, in line order (sagaway show: what one waits behind).
SELECT run_id, key, status, ordering_seq FROM workflows
WHERE ordering_key = %(ordering_key)s AND ordering_key IS NOT NULL
  AND status IN ('PENDING', 'RUNNING', 'WAITING', 'SUSPENDED')
ORDER BY ordering_seq
LIMIT %(limit)s

-- name: supersede
UPDATE workflows
SET status = 'TERMINATED', is_current = FALSE, ended_at = %(now)s, updated_at = %(now)s,
    lease_token = NULL, lease_owner = NULL, lease_expires_at = NULL, next_run_at = NULL,
    error = %(error)s
WHERE run_id = %(run_id)s

-- name: replaced_by
SELECT run_id FROM workflows
WHERE key = %(key)s AND NOT is_current AND status = 'TERMINATED' AND error = %(error)s
ORDER BY ended_at DESC
LIMIT 1

-- name: count_by_status
SELECT status, COUNT(*) FROM workflows WHERE is_current GROUP BY status

-- ---------------------------------------------------------------- steps

-- name: load_steps
SELECT run_id, call_id, kind, name, status, attempts, result, error, started_at, ended_at
FROM steps WHERE run_id = %(run_id)s
ORDER BY started_at, call_id

-- name: load_steps_many
SELECT run_id, call_id, kind, name, status, attempts, result, error, started_at, ended_at
FROM steps WHERE run_id = ANY(%(run_ids)s::text[])
ORDER BY run_id, started_at, call_id

-- name: get_runs
SELECT
       -- use: workflow_columns
FROM workflows WHERE run_id = ANY(%(run_ids)s::text[])

-- name: record_steps_owned
-- A fenced upsert of many steps at once (group commit across workflows): one round trip.
-- The batch travels as one JSON array of objects (one text parameter: cheap to encode, where
-- eleven array parameters cost more client CPU than the statement itself). Owner rows are
-- share-locked in run_id order, so two batches never wait on each other in a cycle; each step is
-- written only if its token still owns a RUNNING execution.
WITH input AS (
    SELECT * FROM json_to_recordset(%(batch)s::json)
        AS i (run_id text, token text, call_id text, kind text, name text, status text,
              attempts integer, result text, error text, started_at double precision,
              ended_at double precision)
), owned AS (
    -- Looked up by primary key only (the status is checked in the join): with the statistics of
    -- a young table the planner would otherwise scan every RUNNING row through workflows_live.
    SELECT run_id, lease_token, status FROM workflows
    WHERE run_id = ANY(ARRAY(SELECT run_id FROM input))
    ORDER BY run_id
    FOR SHARE
)
INSERT INTO steps (run_id, call_id, kind, name, status, attempts, result, error, started_at,
                   ended_at)
SELECT i.run_id, i.call_id, i.kind, i.name, i.status, i.attempts, i.result, i.error,
       i.started_at, i.ended_at
FROM input AS i
JOIN owned AS o ON o.run_id = i.run_id AND o.lease_token = i.token AND o.status = 'RUNNING'
ON CONFLICT (run_id, call_id) DO UPDATE SET
    kind = excluded.kind, name = excluded.name, status = excluded.status,
    attempts = excluded.attempts, result = excluded.result, error = excluded.error,
    ended_at = excluded.ended_at
RETURNING run_id, call_id

-- name: record_step_owned
-- record_steps_owned for a batch of one (the usual case under light load): plain parameters and
-- a primary-key lookup, cheaper to encode and to plan.
WITH owned AS (
    SELECT 1 FROM workflows
    WHERE run_id = %(run_id)s AND lease_token = %(token)s AND status = 'RUNNING'
    FOR SHARE
)
INSERT INTO steps (run_id, call_id, kind, name, status, attempts, result, error, started_at,
                   ended_at)
SELECT %(run_id)s, %(call_id)s, %(kind)s, %(name)s, %(status)s, %(attempts)s, %(result)s,
       %(error)s, %(started_at)s, %(ended_at)s
WHERE EXISTS (SELECT 1 FROM owned)
ON CONFLICT (run_id, call_id) DO UPDATE SET
    kind = excluded.kind, name = excluded.name, status = excluded.status,
    attempts = excluded.attempts, result = excluded.result, error = excluded.error,
    ended_at = excluded.ended_at
RETURNING run_id, call_id

-- name: upsert_step
INSERT INTO steps (run_id, call_id, kind, name, status, attempts, result, error, started_at,
                   ended_at)
VALUES (%(run_id)s, %(call_id)s, %(kind)s, %(name)s, %(status)s, %(attempts)s, %(result)s,
        %(error)s, %(started_at)s, %(ended_at)s)
ON CONFLICT (run_id, call_id) DO UPDATE SET
    kind = excluded.kind, name = excluded.name, status = excluded.status,
    attempts = excluded.attempts, result = excluded.result, error = excluded.error,
    ended_at = excluded.ended_at

-- ---------------------------------------------------------------- fenced writes

-- fragment: finish_update
-- The owner's end of its own execution, under a CTE "ending" that sets ending_owner (used by
-- finish_owned and finish_owned_with_step).
UPDATE workflows
SET status = %(status)s, result = %(result)s, error = %(error)s, ended_at = %(now)s,
    updated_at = %(now)s,
    lease_token = NULL, lease_owner = NULL, lease_expires_at = NULL, next_run_at = NULL
FROM ending
WHERE run_id = %(run_id)s AND lease_token = %(token)s AND status = 'RUNNING'
  AND (%(status)s <> 'COMPLETED' OR %(cancel_seen)s OR cancel_reason IS NULL)

-- name: finish_owned
-- The owner ends its own execution: ending_owner (see "self ends unannounced") spares it the
-- notice of its own end.
WITH ending AS (SELECT set_config('sagaway.ending_owner', %(ended_by)s, true))
-- use: finish_update

-- name: finish_owned_with_step
-- finish_owned and the final step in one statement (its waiters: wake_waiters, after it).
WITH ending AS (SELECT set_config('sagaway.ending_owner', %(ended_by)s, true)
), ended AS (
    -- use: finish_update
    RETURNING run_id
), step AS (
    INSERT INTO steps (run_id, call_id, kind, name, status, attempts, result, error, started_at,
                       ended_at)
    SELECT run_id, %(step_call_id)s, %(step_kind)s, %(step_name)s, %(step_status)s,
           %(step_attempts)s, %(step_result)s, %(step_error)s, %(step_started_at)s,
           %(step_ended_at)s
    FROM ended
    ON CONFLICT (run_id, call_id) DO UPDATE SET
        kind = excluded.kind, name = excluded.name, status = excluded.status,
        attempts = excluded.attempts, result = excluded.result, error = excluded.error,
        ended_at = excluded.ended_at
)
SELECT run_id FROM ended

-- name: finish_owned_many
-- finish_owned_with_step for many top-level executions at once (group commit of ends); a row
-- without step_call_id has no final step (rows are the parameters of finish_owned_with_step).
-- Returns the run ids that were ended.
WITH ending AS (SELECT set_config('sagaway.ending_owner', %(ended_by)s, true)
), input AS (
    SELECT * FROM json_to_recordset(%(batch)s::json)
        AS i (run_id text, token text, status text, result text, error text,
              now double precision, step_call_id text, step_kind text, step_name text,
              step_status text, step_attempts integer, step_result text, step_error text,
              step_started_at double precision, step_ended_at double precision,
              cancel_seen boolean)
), locked AS (
    -- Locked in run_id order (as renew_leases and record_steps_owned do), looked up by primary
    -- key whatever the table's statistics say.
    SELECT run_id FROM workflows
    WHERE run_id = ANY(ARRAY(SELECT run_id FROM input))
    ORDER BY run_id
    FOR UPDATE
), ended AS (
    UPDATE workflows AS w
    SET status = i.status, result = i.result, error = i.error, ended_at = i.now,
        updated_at = i.now,
        lease_token = NULL, lease_owner = NULL, lease_expires_at = NULL, next_run_at = NULL
    FROM input AS i, locked AS l, ending
    WHERE w.run_id = l.run_id AND w.run_id = i.run_id
      AND w.lease_token = i.token AND w.status = 'RUNNING'
      AND (i.status <> 'COMPLETED' OR i.cancel_seen OR w.cancel_reason IS NULL)
    RETURNING w.run_id
), step AS (
    INSERT INTO steps (run_id, call_id, kind, name, status, attempts, result, error, started_at,
                       ended_at)
    SELECT i.run_id, i.step_call_id, i.step_kind, i.step_name, i.step_status, i.step_attempts,
           i.step_result, i.step_error, i.step_started_at, i.step_ended_at
    FROM input AS i JOIN ended AS e ON e.run_id = i.run_id
    WHERE i.step_call_id IS NOT NULL
    ON CONFLICT (run_id, call_id) DO UPDATE SET
        kind = excluded.kind, name = excluded.name, status = excluded.status,
        attempts = excluded.attempts, result = excluded.result, error = excluded.error,
        ended_at = excluded.ended_at
)
SELECT run_id FROM ended

-- name: cancel_pending
-- Why an owned finish was refused: a COMPLETED end may not pass over a cancel request it has
-- not seen (cancel_seen); no row: the lease was lost.
SELECT cancel_reason FROM workflows
WHERE run_id = %(run_id)s AND lease_token = %(token)s AND status = 'RUNNING'
  AND cancel_reason IS NOT NULL

-- name: finished_as
-- After a retried finish: did the attempt whose acknowledgement was lost commit?
SELECT 1 FROM workflows
WHERE run_id = %(run_id)s AND status = %(status)s AND ended_at = %(now)s
  AND result IS NOT DISTINCT FROM %(result)s::text AND error IS NOT DISTINCT FROM %(error)s::text

-- name: suspend_owned
UPDATE workflows
SET status = 'SUSPENDED', error = %(error)s, updated_at = %(now)s, next_run_at = %(next_run_at)s,
    suspend_count = suspend_count + 1,
    lease_token = NULL, lease_owner = NULL, lease_expires_at = NULL
WHERE run_id = %(run_id)s AND lease_token = %(token)s AND status = 'RUNNING'

-- name: suspended_as
SELECT 1 FROM workflows
WHERE run_id = %(run_id)s AND status = 'SUSPENDED' AND updated_at = %(now)s
  AND next_run_at = %(next_run_at)s AND error = %(error)s AND lease_token IS NULL

-- name: release_owned
UPDATE workflows
SET lease_token = NULL, lease_owner = NULL, lease_expires_at = NULL, next_run_at = %(now)s,
    updated_at = %(now)s
WHERE run_id = %(run_id)s AND lease_token = %(token)s AND status = 'RUNNING'

-- name: renew_leases
-- Rows are locked in run_id order, as by the grouped step and end writes of the same process, so
-- a heartbeat and a batch never wait on each other in a cycle. A renewal never shortens a lease:
-- one delayed on its way may land after a later one.
WITH mine AS (
    SELECT run_id FROM workflows
    WHERE status = 'RUNNING' AND lease_token = ANY(%(tokens)s::text[])
    ORDER BY run_id
    FOR UPDATE
)
UPDATE workflows AS w SET lease_expires_at = GREATEST(w.lease_expires_at, %(expires_at)s)
FROM mine
WHERE w.run_id = mine.run_id AND w.status = 'RUNNING'
RETURNING w.lease_token

-- ---------------------------------------------------------------- recovery

-- fragment: due_scope
-- What a worker may take at all: not paused, of its queues and code versions.
AND paused_at IS NULL
AND (%(any_queue)s OR queue = ANY(%(queues)s::text[]))
AND (%(any_version)s OR code_version = ANY(%(versions)s::text[])
     OR (%(unversioned)s AND code_version IS NULL))

-- fragment: due_filter
-- The conditions claim_due and next_due share: due_scope, a PENDING execution's per-key
-- limit, and its per-key order (none ahead of it in its key's line).
-- use: due_scope
AND (concurrency_key IS NULL OR status <> 'PENDING'
     OR (SELECT count(*) FROM workflows AS o
         WHERE o.concurrency_key = workflows.concurrency_key
           AND o.status IN ('RUNNING', 'WAITING', 'SUSPENDED')) < concurrency_limit)
AND (ordering_key IS NULL OR status <> 'PENDING'
     OR NOT EXISTS (SELECT 1 FROM workflows AS ahead
         WHERE ahead.ordering_key = workflows.ordering_key AND ahead.ordering_key IS NOT NULL
           AND ahead.status IN ('PENDING', 'RUNNING', 'WAITING', 'SUSPENDED')
           AND ahead.ordering_seq < workflows.ordering_seq))

-- fragment: claim_order
-- The due work of started executions first (timers, retries, wake-ups, expired leases: work
-- in progress keeps its place), by next_run_at; then PENDING starts, higher priority first,
-- by their fair pass within a level (insert_workflow), then next_run_at.
ORDER BY status = 'PENDING', CASE WHEN status = 'PENDING' THEN priority END DESC,
         CASE WHEN status = 'PENDING' THEN fair_pass END NULLS FIRST, next_run_at, run_id

-- name: claim_due
-- Many processes claim at once: SKIP LOCKED hands each one disjoint rows; a row changed by a
-- claimer that committed meanwhile is re-checked against the WHERE clause before it is locked.
-- previous_owner: the process whose expired lease is taken over (NULL for a run nobody held).
-- In two parts, as claim_order takes them, each read in an index's order and cut at the
-- limit, so a claim reads a few rows however many are due: the due work of started executions
-- by next_run_at, then PENDING starts for what is left of the limit, in the order of
-- workflows_pending_order (priority DESC, fair pass NULLS FIRST, next_run_at, run_id). The
-- per-key limits and lines (due_filter) are tested in the second part only: the first holds
-- no start, and the server plans every subquery written on each call (next_due).
WITH started AS (
    SELECT run_id, next_run_at, lease_owner, status, priority, fair_pass FROM workflows
    WHERE is_current AND status IN ('RUNNING', 'SUSPENDED', 'WAITING')
      AND next_run_at <= %(now)s
      AND (status <> 'RUNNING' OR lease_expires_at IS NULL OR lease_expires_at <= %(now)s)
      AND run_id <> ALL(ARRAY(SELECT json_array_elements_text(%(exclude)s::json)))
      -- use: due_scope
    ORDER BY next_run_at, run_id
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
), waiting AS (
    SELECT run_id, next_run_at, lease_owner, status, priority, fair_pass FROM workflows
    WHERE status = 'PENDING' AND is_current
      AND (lease_expires_at IS NULL OR lease_expires_at <= %(now)s)
      AND next_run_at <= %(now)s
      AND run_id <> ALL(ARRAY(SELECT json_array_elements_text(%(exclude)s::json)))
      -- use: due_filter
    ORDER BY priority DESC, fair_pass NULLS FIRST, next_run_at, run_id
    LIMIT %(limit)s - (SELECT count(*) FROM started)
    FOR UPDATE SKIP LOCKED
), due AS (
    -- (no more than the limit already; the LIMIT tells the planner so)
    SELECT * FROM started UNION ALL SELECT * FROM waiting
    LIMIT %(limit)s
), numbered AS (
    SELECT run_id, lease_owner, status, row_number() OVER (
        -- use: claim_order
        ) AS n
    FROM due
)
UPDATE workflows AS w
SET status = 'RUNNING', lease_token = %(token_base)s || (%(token_offset)s::bigint + numbered.n)::text,
    lease_owner = %(owner)s,
    lease_expires_at = %(expires_at)s, updated_at = %(now)s, waiting_for = NULL
FROM numbered
WHERE w.run_id = numbered.run_id
RETURNING numbered.n, w.lease_token, numbered.lease_owner AS previous_owner,
          numbered.status AS previous_status, w.concurrency_limit,
          w.run_id, w.key, w.name, w.args, w.args_hash, w.status, w.result, w.error,
          w.parent_key, w.created_at, w.updated_at, w.ended_at, w.lease_owner,
          w.lease_expires_at, w.next_run_at, w.suspend_count, w.key_space,
          w.cancel_reason, w.deadline_at, w.trace_context, w.code_version,
          w.concurrency_key, w.ordering_key, w.ordering_seq, w.debounce_key,
          w.priority, w.fairness_key, w.fairness_weight, w.fair_pass

-- name: lock_concurrency_key
-- Claims of one per-key limit's key take turns (until commit), so each counts the others'.
SELECT pg_advisory_xact_lock(hashtextextended(%(concurrency_key)s, 0))

-- name: running_with_key
SELECT count(*) FROM workflows
WHERE concurrency_key = %(concurrency_key)s AND status IN ('RUNNING', 'WAITING', 'SUSPENDED')

-- name: unclaim
-- A claim over a per-key limit is given back: PENDING again, no lease.
UPDATE workflows
SET status = 'PENDING', lease_token = NULL, lease_owner = NULL, lease_expires_at = NULL
WHERE run_id = ANY(%(run_ids)s::text[]) AND status = 'RUNNING'

-- name: claimed_with
-- After a retried claim: the executions an attempt whose acknowledgement was lost did take.
SELECT
       -- use: workflow_columns
       , lease_token
FROM workflows
WHERE status = 'RUNNING' AND lease_token = ANY(%(tokens)s::text[])
ORDER BY next_run_at, run_id

-- name: start_place
-- How many due PENDING starts a claim takes before %(run_id)s while it is PENDING: those of a
-- higher level, and of its level with an earlier pass (or the same, due earlier), as
-- claim_order takes them. Counted on workflows_pending_order (for `sagaway show`).
SELECT (SELECT COUNT(*) FROM workflows AS o
        WHERE o.status = 'PENDING' AND o.next_run_at <= %(now)s AND o.run_id <> w.run_id
          AND (o.priority > w.priority
               OR (o.priority = w.priority
                   AND (COALESCE(o.fair_pass, -1) < COALESCE(w.fair_pass, -1)
                        OR (COALESCE(o.fair_pass, -1) = COALESCE(w.fair_pass, -1)
                            AND o.next_run_at < w.next_run_at))))) AS ahead
FROM workflows AS w
WHERE w.run_id = %(run_id)s AND w.status = 'PENDING'

-- name: next_due
-- The earliest of: the leases and start times of PENDING and RUNNING executions (what runs or
-- is about to), and the first wake-up of the WAITING and of the SUSPENDED ones, read in the
-- order of workflows_live and cut at the first that passes the filter. So a worker's look
-- between two scans reads a few rows however many executions wait: a min() over every live
-- row read each waiting one, a million each second with a million waits. Only the PENDING
-- part tests the per-key limits and lines (due_filter; the other parts hold no start): the
-- server plans every subquery written on each call (the filter's flags keep it on custom
-- plans), and that planning, not the reading, was most of the statement's cost.
SELECT min(t) FROM (
    -- A PENDING execution holds no lease (it is created without one, and a lease given back
    -- makes it PENDING with none): its time is its start, read in workflows_live's order.
    (SELECT next_run_at AS t FROM workflows
     WHERE is_current AND status IN ('PENDING', 'RUNNING', 'SUSPENDED', 'WAITING')
       AND status = 'PENDING'
       AND next_run_at IS NOT NULL AND lease_owner IS DISTINCT FROM %(owner)s
       -- use: due_filter
     ORDER BY next_run_at
     LIMIT 1)
    UNION ALL
    SELECT min(COALESCE(lease_expires_at, next_run_at)) AS t FROM workflows
    WHERE is_current AND status IN ('PENDING', 'RUNNING', 'SUSPENDED', 'WAITING')
      AND status = 'RUNNING'
      AND lease_owner IS DISTINCT FROM %(owner)s
      -- use: due_scope
    UNION ALL
    (SELECT next_run_at AS t FROM workflows
     WHERE is_current AND status IN ('PENDING', 'RUNNING', 'SUSPENDED', 'WAITING')
       AND status = 'WAITING'
       AND next_run_at IS NOT NULL AND lease_owner IS DISTINCT FROM %(owner)s
       -- use: due_scope
     ORDER BY next_run_at
     LIMIT 1)
    UNION ALL
    (SELECT next_run_at AS t FROM workflows
     WHERE is_current AND status IN ('PENDING', 'RUNNING', 'SUSPENDED', 'WAITING')
       AND status = 'SUSPENDED'
       AND next_run_at IS NOT NULL AND lease_owner IS DISTINCT FROM %(owner)s
       -- use: due_scope
     ORDER BY next_run_at
     LIMIT 1)) AS parts

-- ---------------------------------------------------------------- operator requests

-- name: end_by_request
UPDATE workflows
SET status = %(status)s, ended_at = %(now)s, updated_at = %(now)s, error = %(error)s,
    lease_token = NULL, lease_owner = NULL, lease_expires_at = NULL, next_run_at = NULL
WHERE run_id = %(run_id)s AND status IN ('PENDING', 'RUNNING', 'SUSPENDED', 'WAITING')

-- name: ended_as
SELECT 1 FROM workflows
WHERE run_id = %(run_id)s AND status = %(status)s AND ended_at = %(now)s
  AND error IS NOT DISTINCT FROM %(error)s::text

-- name: request_cancel
-- Recorded once (the first reason stays); a run no process holds becomes due at once, so it
-- runs to its next durable call or wait and sees the cancellation there. A leased run's process
-- is told by the trigger's 'cancel:' notice (or its next heartbeat). Every request, accepted or
-- not, is logged by the same statement (cancel_requests); returns whether it was accepted.
-- The run is key-share locked first (target): a purge deleting it meanwhile is waited for, and
-- once it commits the row is gone from target, so nothing is inserted (no row: not accepted)
-- where the insert would otherwise fail on its foreign key (its snapshot still showed the row).
-- The update joins target so the lock is taken before the row changes (a row this statement
-- has changed already could not be locked by it).
WITH target AS (
    SELECT run_id FROM workflows WHERE run_id = %(run_id)s
    FOR KEY SHARE
), accepted AS (
    UPDATE workflows AS w
    SET cancel_reason = COALESCE(w.cancel_reason, %(reason)s), updated_at = %(now)s,
        next_run_at = CASE WHEN w.status IN ('WAITING', 'SUSPENDED') THEN %(now)s
                           ELSE w.next_run_at END
    FROM target AS t
    WHERE w.run_id = t.run_id AND w.status IN ('PENDING', 'RUNNING', 'SUSPENDED', 'WAITING')
    RETURNING w.run_id
)
INSERT INTO cancel_requests (run_id, reason, requested_at, accepted)
SELECT t.run_id, %(reason)s, %(now)s, EXISTS (SELECT 1 FROM accepted)
FROM target AS t
RETURNING accepted

-- name: list_cancel_requests
SELECT reason, requested_at, accepted FROM cancel_requests
WHERE run_id = %(run_id)s ORDER BY seq

-- name: cancel_requests
SELECT run_id, cancel_reason FROM workflows
WHERE run_id = ANY(%(run_ids)s::text[])
  AND cancel_reason IS NOT NULL

-- name: retry_now
UPDATE workflows SET next_run_at = %(now)s, updated_at = %(now)s
WHERE run_id = %(run_id)s AND status = 'SUSPENDED'

-- name: retried_as
SELECT 1 FROM workflows
WHERE run_id = %(run_id)s AND status = 'SUSPENDED' AND next_run_at = %(now)s
  AND updated_at = %(now)s

-- name: wake_waiters
-- Every execution WAITING for one of the ended executions :run_ids (as its child) becomes due
-- at once: the parent that created it and any other that attached to it under the same key.
-- (A batch of ends passes all its run ids; those it did not end, having lost their lease, are
-- not ended and wake no one.) Run after the end in its transaction, as a statement of its own:
-- a waiter that held a share lock on an ended row while deciding to wait committed before the
-- end could lock the row, and only a later statement's snapshot sees it WAITING.
UPDATE workflows SET next_run_at = %(now)s, updated_at = %(now)s
WHERE status = 'WAITING'
  AND waiting_for = ANY(ARRAY(
      SELECT 'child:' || key FROM workflows
      WHERE run_id = ANY(%(run_ids)s::text[])
        AND status IN ('COMPLETED', 'FAILED', 'CANCELLED', 'TERMINATED')))
  AND is_current

-- ---------------------------------------------------------------- durable waits (schema v2)
-- Lost wake-ups are prevented by row locks on the waiting execution: a receiver locks its own
-- row (FOR NO KEY UPDATE) before it looks for signals, and a sender locks the same row before
-- it stores one, so one of them sees the other's committed work. A parent share-locks its
-- child's row before deciding to wait for it, so the child's end waits for that decision (and
-- then wakes the parent) or the parent sees the end. Locks are taken child before parent, as
-- the child's end does, so the two never deadlock.

-- name: signal_target
SELECT
       -- use: workflow_columns
FROM workflows WHERE key = %(key)s AND is_current
FOR NO KEY UPDATE

-- name: insert_signal
-- sender: a token the send chose once for all its attempts (see signal_sent_as, deduped_by).
INSERT INTO signals (run_id, name, payload, dedupe_id, created_at, sender)
VALUES (%(run_id)s, %(name)s, %(payload)s, %(dedupe_id)s, %(now)s, %(sender)s)
ON CONFLICT (run_id, name, dedupe_id) WHERE dedupe_id IS NOT NULL DO NOTHING

-- name: signal_sent_as
-- After a retried send without dedupe_id: did the attempt whose acknowledgement was lost store it?
SELECT 1 FROM signals
WHERE run_id = %(run_id)s AND name = %(name)s AND dedupe_id IS NULL AND sender = %(sender)s

-- name: deduped_by
-- After a retried send with a dedupe_id: who stored the row holding it (the lost attempt itself,
-- or an earlier send)? Found through the unique index signals_dedupe.
SELECT sender FROM signals
WHERE run_id = %(run_id)s AND name = %(name)s AND dedupe_id = %(dedupe_id)s

-- name: wake_waiting
UPDATE workflows SET next_run_at = %(now)s, updated_at = %(now)s
WHERE run_id = %(run_id)s AND status = 'WAITING' AND waiting_for = %(waiting_for)s

-- name: lock_owned
SELECT 1 FROM workflows
WHERE run_id = %(run_id)s AND lease_token = %(token)s AND status = 'RUNNING'
FOR NO KEY UPDATE

-- name: pending_signals
SELECT id, payload FROM signals
WHERE run_id = %(run_id)s AND name = %(name)s AND consumed_at IS NULL
ORDER BY id

-- name: consumed_by
-- After a retried receive: the signal an attempt whose acknowledgement was lost delivered.
SELECT payload FROM signals
WHERE run_id = %(run_id)s AND consumed_call = %(call_id)s AND rejected IS NULL
ORDER BY id
LIMIT 1

-- name: consume_signal
UPDATE signals SET consumed_call = %(call_id)s, consumed_at = %(now)s WHERE id = %(id)s

-- name: reject_signal
UPDATE signals SET consumed_at = %(now)s, rejected = %(error)s WHERE id = %(id)s

-- name: wait_owned
-- A workflow deadline (deadline_at) ends a wait too: the run becomes due by then at the latest
-- (LEAST ignores NULLs). A cancel request that came while it ran makes it due at once (the
-- request saw it RUNNING, so it did not: a WAITING run with a request must not sleep on).
UPDATE workflows
SET status = 'WAITING', waiting_for = %(waiting_for)s,
    next_run_at = CASE WHEN cancel_reason IS NOT NULL THEN %(now)s
                       ELSE LEAST(%(next_run_at)s::double precision, deadline_at) END,
    updated_at = %(now)s, lease_token = NULL, lease_owner = NULL, lease_expires_at = NULL
WHERE run_id = %(run_id)s AND lease_token = %(token)s AND status = 'RUNNING'

-- name: waiting_as
-- After a retried wait: did the attempt whose acknowledgement was lost start the wait?
SELECT 1 FROM workflows
WHERE run_id = %(run_id)s AND status = 'WAITING' AND waiting_for = %(waiting_for)s
  AND updated_at = %(now)s

-- name: get_current_shared
SELECT
       -- use: workflow_columns
FROM workflows WHERE key = %(key)s AND is_current
FOR SHARE

-- name: list_signals
SELECT id, name, payload, dedupe_id, created_at, consumed_call, consumed_at, rejected
FROM signals WHERE run_id = %(run_id)s ORDER BY id

-- name: server_time
SELECT extract(epoch FROM clock_timestamp())::double precision

-- ---------------------------------------------------------------- fork (store/_pg_fork.py)

-- name: fork_workflow
-- A new PENDING execution under %(key)s with the name, arguments and queue of the ended
-- execution %(source_run_id)s, and the code version of the forking process; nothing if the
-- key is taken or the source is not ended. The
-- notify trigger announces it ('ready:') at commit, as it does a start no process owns.
-- The source is key-share locked until the transaction ends: a purge cannot delete it before
-- fork_steps has copied its steps (it skips a locked row), and one deleting it meanwhile is
-- waited for, after which the source is gone and nothing is inserted.
INSERT INTO workflows (
    -- use: forked_columns
)
SELECT %(run_id)s, %(key)s, TRUE, name, args, args_hash, 'PENDING', NULL, %(now)s, %(now)s,
       NULL, NULL, NULL, %(now)s, queue, %(key_space)s, %(code_version)s, priority, fairness_key,
       fairness_weight,
       -- its place: its level's virtual time now (the oldest PENDING start's pass there)
       COALESCE((SELECT MIN(p.fair_pass) FROM workflows AS p
                 WHERE p.status = 'PENDING' AND p.priority = workflows.priority
                   AND p.fair_pass IS NOT NULL), 0)
FROM workflows
WHERE run_id = %(source_run_id)s AND status IN ('COMPLETED', 'FAILED', 'CANCELLED', 'TERMINATED')
FOR KEY SHARE
ON CONFLICT (key) WHERE is_current DO NOTHING
RETURNING
       -- use: workflow_columns

-- name: fork_lost_children
-- The kept child starts (steps %(call_ids)s of %(source_run_id)s) whose child has no execution:
-- a purge took it after the fork looked, and a fork keeping that start would read an end that
-- is gone, so none is made. The children found are key-share locked until the transaction ends:
-- a purge skips a locked row, and once the fork commits it keeps them for their live reader.
WITH kept AS (
    SELECT s.call_id, s.result::jsonb #>> '{}' AS child_key FROM steps s
    WHERE s.run_id = %(source_run_id)s AND s.call_id = ANY(%(call_ids)s)
      AND s.kind = 'child' AND s.result IS NOT NULL
), found AS (
    SELECT c.key FROM workflows c
    WHERE c.is_current AND c.key IN (SELECT child_key FROM kept)
    FOR KEY SHARE OF c
)
SELECT kept.call_id FROM kept WHERE kept.child_key NOT IN (SELECT key FROM found)

-- name: fork_steps
INSERT INTO steps (run_id, call_id, kind, name, status, attempts, result, error, started_at, ended_at)
SELECT %(run_id)s, call_id, kind, name, status, attempts, result, error, started_at, ended_at
FROM steps
WHERE run_id = %(source_run_id)s AND call_id = ANY(%(call_ids)s)
ON CONFLICT (run_id, call_id) DO NOTHING

-- name: fork_args
-- A fork's arguments re-sealed for its run by the forking process's codec (store/_fork.py).
UPDATE workflows SET args = %(args)s WHERE run_id = %(run_id)s

-- name: fork_step_payloads
UPDATE steps SET result = %(result)s, error = %(error)s
WHERE run_id = %(run_id)s AND call_id = %(call_id)s

-- ---------------------------------------------------------------- retention (schema v9)
-- A purge batch is one statement, so one short transaction: the oldest ended executions of the
-- given statuses that ended before the cutoff, locked with SKIP LOCKED (a row another purger
-- holds is left to it; live rows are never selected), then their steps, signals and rows. An
-- ended workflow is kept while a live one may still read its outcome: its parent (which reads
-- the child's end when it resumes, and may not have recorded the child's start yet), and every
-- live workflow whose recorded child start names its key (one that attached to it under a
-- shared key, a fork that kept the start), found through steps_child_key: the start's result
-- is the key as JSON, as to_json spells it. The literal status list matches the partial index
-- workflows_ended.

-- name: purgeable
-- The ended executions a purge may delete (purge_ended takes the oldest, count_purgeable counts
-- them all): a fragment the two queries use.
SELECT w.run_id FROM workflows w
WHERE w.status IN ('COMPLETED', 'FAILED', 'CANCELLED', 'TERMINATED')
  AND w.status = ANY(%(statuses)s::text[])
  AND w.ended_at < %(before)s
  AND NOT EXISTS (
      SELECT 1 FROM workflows p
      WHERE p.key = w.parent_key COLLATE "C" AND p.is_current
        AND p.status IN ('PENDING', 'RUNNING', 'WAITING', 'SUSPENDED'))
  AND NOT EXISTS (
      SELECT 1 FROM steps s JOIN workflows r ON r.run_id = s.run_id
      WHERE s.kind = 'child' AND s.result = to_json(w.key)::text
        AND r.status IN ('PENDING', 'RUNNING', 'WAITING', 'SUSPENDED'))

-- name: purge_ended
WITH doomed AS (
    -- use: purgeable
    ORDER BY w.ended_at
    LIMIT %(limit)s
    FOR UPDATE OF w SKIP LOCKED
), gone_steps AS (
    DELETE FROM steps WHERE run_id IN (SELECT run_id FROM doomed)
), gone_signals AS (
    DELETE FROM signals WHERE run_id IN (SELECT run_id FROM doomed)
), gone_starts AS (
    DELETE FROM debounced_starts WHERE run_id IN (SELECT run_id FROM doomed)
)
DELETE FROM workflows WHERE run_id IN (SELECT run_id FROM doomed)
RETURNING run_id

-- name: count_purgeable
SELECT count(*) FROM (
    -- use: purgeable
) AS purgeable
-- ---------------------------------------------------------------- schedules

-- name: put_schedule
-- Create or update a schedule. An update keeps the next tick when the expression and time zone
-- are the same (ticks missed meanwhile are then caught up), unless it resumes a paused one (the
-- ticks of a pause are never run); keep_paused leaves an operator's pause as it is.
INSERT INTO schedules (id, workflow, args, queue, cron, timezone, catch_up, paused, next_tick_at,
                       created_at, updated_at)
VALUES (%(id)s, %(workflow)s, %(args)s, %(queue)s, %(cron)s, %(timezone)s, %(catch_up)s, %(paused)s,
        %(next_tick_at)s, %(now)s, %(now)s)
ON CONFLICT (id) DO UPDATE SET
    workflow = excluded.workflow, args = excluded.args, queue = excluded.queue,
    cron = excluded.cron, timezone = excluded.timezone, catch_up = excluded.catch_up,
    paused = CASE WHEN %(keep_paused)s THEN schedules.paused ELSE excluded.paused END,
    next_tick_at = CASE
        WHEN schedules.cron = excluded.cron AND schedules.timezone = excluded.timezone
             AND NOT (schedules.paused AND NOT (CASE WHEN %(keep_paused)s THEN schedules.paused ELSE excluded.paused END))
        THEN schedules.next_tick_at ELSE excluded.next_tick_at END,
    updated_at = excluded.updated_at

-- name: get_schedule
SELECT id, workflow, args, queue, cron, timezone, catch_up, paused, next_tick_at, created_at, updated_at, last_tick_at
FROM schedules WHERE id = %(id)s

-- name: list_schedules
SELECT id, workflow, args, queue, cron, timezone, catch_up, paused, next_tick_at, created_at, updated_at, last_tick_at
FROM schedules ORDER BY id

-- name: set_schedule_paused
-- Resuming a paused schedule moves its next tick to the first one from now on.
UPDATE schedules
SET next_tick_at = CASE WHEN paused AND NOT %(paused)s THEN %(next_tick_at)s ELSE next_tick_at END,
    paused = %(paused)s, updated_at = %(now)s
WHERE id = %(id)s

-- name: delete_schedule
DELETE FROM schedules WHERE id = %(id)s

-- name: advance_schedule
-- The compare-and-set of a tick: only the scheduler that read next_tick_at = tick_at wins.
UPDATE schedules
SET next_tick_at = %(next_tick_at)s, last_tick_at = COALESCE(%(last_tick_at)s, last_tick_at)
WHERE id = %(id)s AND next_tick_at = %(tick_at)s AND NOT paused

-- ---------------------------------------------------------------- inspection

-- name: list_attempt_errors
-- The errors of the attempts a step row no longer holds, and the error of the attempt it holds
-- (see migration "superseded attempt errors"); a row of attempt_errors written before that
-- version for the attempt the step row holds gives way to the step row.
SELECT a.call_id, a.attempt, a.error, a.at FROM attempt_errors a
WHERE a.run_id = %(run_id)s
  AND NOT EXISTS (SELECT 1 FROM steps s
                  WHERE s.run_id = a.run_id AND s.call_id = a.call_id
                    AND s.attempts = a.attempt AND s.error IS NOT NULL)
UNION ALL
SELECT call_id, attempts, error, COALESCE(ended_at, started_at) FROM steps
WHERE run_id = %(run_id)s AND error IS NOT NULL
ORDER BY 1, 2

-- ---------------------------------------------------------------- cluster-wide queue limits
-- name: queue_limit_row
INSERT INTO queue_limits (queue) VALUES (%(queue)s) ON CONFLICT (queue) DO NOTHING

-- name: lock_queue_limit
SELECT next_start_at FROM queue_limits WHERE queue = %(queue)s FOR UPDATE

-- name: holds_queue_slot
SELECT 1 FROM queue_slots WHERE queue = %(queue)s AND holder = %(holder)s AND expires_at > %(now)s

-- name: drop_expired_slots
DELETE FROM queue_slots WHERE queue = %(queue)s AND expires_at <= %(now)s

-- name: count_queue_slots
SELECT count(*) FROM queue_slots WHERE queue = %(queue)s

-- name: take_queue_slot
INSERT INTO queue_slots (queue, holder, expires_at) VALUES (%(queue)s, %(holder)s, %(expires_at)s)
ON CONFLICT (queue, holder) DO UPDATE SET expires_at = excluded.expires_at

-- name: space_queue_starts
UPDATE queue_limits SET next_start_at = %(next_start_at)s WHERE queue = %(queue)s

-- name: renew_queue_slot
UPDATE queue_slots SET expires_at = %(expires_at)s
WHERE queue = %(queue)s AND holder = %(holder)s AND expires_at > %(now)s

-- name: release_queue_slot
DELETE FROM queue_slots WHERE queue = %(queue)s AND holder = %(holder)s

-- name: drop_expired_waiters
DELETE FROM queue_waiters WHERE queue = %(queue)s AND expires_at <= %(now)s

-- name: waiter_since
SELECT since FROM queue_waiters
WHERE queue = %(queue)s AND run_id = %(run_id)s AND call_id = %(call_id)s

-- name: waiters_ahead
-- The live waiters of the queue that go before this call: a higher priority, or the same one
-- and waiting since earlier (ties by run and call id). A waiter whose workflow is no longer
-- live (cancelled, ended, suspended) is passed over at once, before its row expires.
SELECT count(*) FROM queue_waiters q
WHERE q.queue = %(queue)s AND q.expires_at > %(now)s
  AND (q.priority > %(priority)s
       OR (q.priority = %(priority)s AND (q.since < %(since)s
           OR (q.since = %(since)s AND (q.run_id, q.call_id) < (%(run_id)s, %(call_id)s)))))
  AND EXISTS (SELECT 1 FROM workflows w
              WHERE w.run_id = q.run_id AND w.status IN ('PENDING', 'RUNNING', 'WAITING'))

-- name: keep_waiter
INSERT INTO queue_waiters (queue, run_id, call_id, priority, since, expires_at)
VALUES (%(queue)s, %(run_id)s, %(call_id)s, %(priority)s, %(since)s, %(expires_at)s)
ON CONFLICT (queue, run_id, call_id)
DO UPDATE SET priority = excluded.priority, expires_at = excluded.expires_at

-- name: drop_waiter
DELETE FROM queue_waiters
WHERE queue = %(queue)s AND run_id = %(run_id)s AND call_id = %(call_id)s

-- name: queue_place
-- Where the execution's call waits in a cluster queue's line, if one does: the queue, the
-- call's priority and how many live waiters go before it (as waiters_ahead counts them).
SELECT q.queue, q.priority,
       (SELECT count(*) FROM queue_waiters o
        WHERE o.queue = q.queue AND o.expires_at > %(now)s
-- use: waits_before_q
        ) AS ahead
FROM queue_waiters q
WHERE q.run_id = %(run_id)s AND q.expires_at > %(now)s
ORDER BY q.since, q.queue, q.call_id
LIMIT 1

-- name: wake_queue_waiter
-- A slot was given back: the workflow of the queue's first live waiter (by priority, then
-- waiting time: the one call that may take it) looks again now, instead of at its next
-- poll (its 'ready:' notice wakes the claimers); with no waiter recorded, the waiting
-- workflow of the highest priority (of those, the one that has waited longest).
UPDATE workflows SET next_run_at = %(now)s
WHERE status = 'WAITING' AND waiting_for = %(waiting_for)s AND next_run_at > %(now)s
  AND run_id = COALESCE(
    (SELECT q.run_id FROM queue_waiters q
     WHERE q.queue = %(queue)s AND q.expires_at > %(now)s
       AND EXISTS (SELECT 1 FROM workflows w
                   WHERE w.run_id = q.run_id AND w.status IN ('PENDING', 'RUNNING', 'WAITING'))
     ORDER BY q.priority DESC, q.since, q.run_id, q.call_id
     LIMIT 1),
    (SELECT run_id FROM workflows
        WHERE status = 'WAITING' AND waiting_for = %(waiting_for)s AND next_run_at > %(now)s
        ORDER BY priority DESC, updated_at, run_id
        LIMIT 1
        FOR UPDATE SKIP LOCKED))

-- ---------------------------------------------------------------- audit trail (store/_audit.py)
-- An entry about an execution reads its run id and key from the row itself; `at` is the
-- column's default, the database server's clock. A repeated entry_id (a transaction retried
-- after a lost acknowledgement, a call tried again) adds nothing.

-- name: insert_audit_for_run
INSERT INTO audit_log (entry_id, actor, on_behalf_of, action, run_id, target, reason, details)
SELECT %(entry_id)s, %(actor)s, %(on_behalf_of)s, %(action)s, run_id, key, %(reason)s,
       %(details)s
FROM workflows WHERE run_id = %(run_id)s
ON CONFLICT (entry_id) DO NOTHING

-- name: insert_audit
INSERT INTO audit_log (entry_id, actor, on_behalf_of, action, target, reason, details)
VALUES (%(entry_id)s, %(actor)s, %(on_behalf_of)s, %(action)s, %(target)s, %(reason)s,
        %(details)s)
ON CONFLICT (entry_id) DO NOTHING

-- ---------------------------------------------------------------- pauses (schema v25)

-- name: pause_workflow
-- No worker claims it now (due_filter); its owner, if any, hears of it (paused_runs) and stops
-- before its next durable call. The first pause's time stays.
UPDATE workflows SET paused_at = COALESCE(paused_at, %(now)s), updated_at = %(now)s
WHERE run_id = %(run_id)s AND status IN ('PENDING', 'RUNNING', 'SUSPENDED', 'WAITING')

-- name: resume_workflow
-- Due as it was; one that became due while paused is due now (the trigger announces it).
UPDATE workflows
SET paused_at = NULL, updated_at = %(now)s,
    next_run_at = CASE WHEN next_run_at <= %(now)s THEN %(now)s ELSE next_run_at END
WHERE run_id = %(run_id)s AND paused_at IS NOT NULL

-- name: paused_runs
SELECT run_id FROM workflows
WHERE run_id = ANY(%(run_ids)s::text[]) AND paused_at IS NOT NULL

-- name: pause_calls
INSERT INTO paused_calls (kind, name, reason, paused_at)
VALUES (%(kind)s, %(name)s, %(reason)s, %(now)s)
ON CONFLICT (kind, name) DO NOTHING

-- name: resume_calls
DELETE FROM paused_calls WHERE kind = %(kind)s AND name = %(name)s

-- name: wake_paused_calls
-- Resumed: the workflows waiting for it look again now.
UPDATE workflows SET next_run_at = %(now)s, updated_at = %(now)s
WHERE status = 'WAITING' AND waiting_for = %(waiting_for)s

-- name: list_paused_calls
SELECT kind, name, reason, paused_at FROM paused_calls ORDER BY kind, name
-- ---------------------------------------------------------------- events, streams, attributes

-- name: step_recorded
SELECT 1 FROM steps WHERE run_id = %(run_id)s AND call_id = %(call_id)s

-- name: insert_output
-- The execution's next seq, and the next position of the stream (or of the event's key): both
-- a lookup at the end of an index; the owner's row lock (lock_owned) makes it the only writer.
INSERT INTO outputs (run_id, seq, call_id, kind, name, position, value, at)
VALUES (
    %(run_id)s,
    coalesce((SELECT max(seq) FROM outputs WHERE run_id = %(run_id)s), 0) + 1,
    %(call_id)s, %(kind)s, %(name)s,
    coalesce((SELECT max(position) FROM outputs
              WHERE run_id = %(run_id)s AND kind = %(kind)s AND name = %(name)s), -1) + 1,
    %(value)s, %(now)s)

-- name: upsert_search_attribute
INSERT INTO search_attributes (run_id, name, kind, str_value, num_value, created_at)
SELECT run_id, %(name)s, %(kind)s, %(text)s, %(number)s, created_at
FROM workflows WHERE run_id = %(run_id)s
ON CONFLICT (run_id, name) DO UPDATE SET
    kind = excluded.kind, str_value = excluded.str_value, num_value = excluded.num_value

-- name: read_outputs
SELECT seq, call_id, kind, name, position, value, at FROM outputs
WHERE run_id = %(run_id)s AND seq > %(after)s ORDER BY seq LIMIT %(limit)s

-- name: read_stream
SELECT seq, call_id, kind, name, position, value, at FROM outputs
WHERE run_id = %(run_id)s AND kind = 'stream' AND name = %(stream)s AND position >= %(offset)s
ORDER BY position LIMIT %(limit)s

-- name: get_event
SELECT seq, call_id, kind, name, position, value, at FROM outputs
WHERE run_id = %(run_id)s AND kind = 'event' AND name = %(key)s
ORDER BY position DESC LIMIT 1

-- name: list_search_attributes
SELECT name, kind, str_value, num_value FROM search_attributes
WHERE run_id = %(run_id)s ORDER BY name

-- name: insert_attribute_write
-- Each attribute a publication sets, in order, with its step (schema v26): a fork rebuilds
-- its search attributes from the writes of the steps it keeps.
INSERT INTO attribute_writes (run_id, seq, call_id, name, kind, str_value, num_value)
VALUES (
    %(run_id)s,
    coalesce((SELECT max(seq) FROM attribute_writes WHERE run_id = %(run_id)s), 0) + 1,
    %(call_id)s, %(name)s, %(kind)s, %(text)s, %(number)s)

-- name: fork_outputs
-- What the kept publish steps of the source wrote, in the order they wrote it (store/_fork.py
-- numbers the copies again: seq from 1, each stream's positions from 0).
SELECT seq, call_id, kind, name, position, value, at FROM outputs
WHERE run_id = %(source_run_id)s AND call_id = ANY(%(call_ids)s)
ORDER BY seq

-- name: fork_output
INSERT INTO outputs (run_id, seq, call_id, kind, name, position, value, at)
VALUES (%(run_id)s, %(seq)s, %(call_id)s, %(kind)s, %(name)s, %(position)s, %(value)s, %(at)s)

-- name: fork_attribute_writes
SELECT call_id, name, kind, str_value, num_value FROM attribute_writes
WHERE run_id = %(source_run_id)s AND call_id = ANY(%(call_ids)s)
ORDER BY seq
