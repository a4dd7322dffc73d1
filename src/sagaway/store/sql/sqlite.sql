-- ---------------------------------------------------------------- migrations

-- name: create_schema_migrations
CREATE TABLE IF NOT EXISTS schema_migrations
    (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at REAL NOT NULL)

-- name: schema_version
SELECT COALESCE(MAX(version), 0) FROM schema_migrations

-- name: record_migration
INSERT INTO schema_migrations (version, name, applied_at) VALUES (:version, :name, :applied_at)

-- ---------------------------------------------------------------- workflows

-- name: get_current
SELECT
       -- use: workflow_columns
FROM workflows WHERE key = :key AND is_current = 1

-- name: get_run
SELECT
       -- use: workflow_columns
FROM workflows WHERE run_id = :run_id

-- name: insert_workflow
-- The key space is :spare_key_space when current executions are kept under keys derived from
-- :key_space ('<key space>/...', the range up to '<key space>0'): children a purged execution
-- under this key left behind, which the new one's calls must not join (_params.spare_key_space).
INSERT INTO workflows (
    -- use: inserted_columns
)
VALUES (:run_id, :key, 1, :name, :args, :args_hash, :status, :parent_key, :now, :now,
        :lease_token, :lease_owner, :lease_expires_at, :start_at, :queue,
        CASE WHEN :spare_key_space IS NOT NULL AND EXISTS (
                SELECT 1 FROM workflows c
                WHERE c.is_current = 1
                  AND c.key >= :key_space || '/' AND c.key < :key_space || '0')
             THEN :spare_key_space ELSE :key_space END,
        :deadline_at, :trace_context, :code_version, :concurrency_key, :concurrency_limit, :ordering_key,
        CASE WHEN :ordering_key IS NOT NULL THEN 1 + COALESCE((
            SELECT MAX(o.ordering_seq) FROM workflows AS o
            WHERE o.ordering_key = :ordering_key AND o.ordering_key IS NOT NULL
              AND o.status IN ('PENDING', 'RUNNING', 'WAITING', 'SUSPENDED')), 0) END,
        :debounce_key, :debounce_until,
        :priority, :fairness_key, :fairness_weight,
        -- use: fair_pass
        )
ON CONFLICT (key) WHERE is_current = 1 DO NOTHING
RETURNING
       -- use: workflow_columns

-- fragment: fair_pass
-- A new PENDING start's pass (start-time fair queueing, one queue per priority level): after
-- the later of its level's oldest PENDING start (the level's virtual time now) and its key's
-- last PENDING start of the level, by 1/weight. Both are read from the partial indexes of
-- PENDING starts (a few rows each). A start created leased gets none.
CASE WHEN :status = 'PENDING' THEN
    MAX(COALESCE((SELECT MIN(p.fair_pass) FROM workflows AS p
                  WHERE p.status = 'PENDING' AND p.priority = :priority
                    AND p.fair_pass IS NOT NULL), 0),
        COALESCE((SELECT MAX(f.fair_pass) FROM workflows AS f
                  WHERE f.status = 'PENDING' AND f.priority = :priority
                    AND f.fairness_key = :fairness_key), 0))
    + 1.0 / :fairness_weight
END

-- ---------------------------------------------------------------- debounced starts and order

-- name: debounced_start
-- The execution a start with this idempotency key was folded into (a retried start).
SELECT run_id FROM debounced_starts WHERE key = :key

-- name: open_burst
-- The open burst of a debounced start: its workflow's PENDING execution of the key.
SELECT run_id, created_at, debounce_until FROM workflows
WHERE name = :name AND debounce_key = :debounce_key AND debounce_key IS NOT NULL
  AND status = 'PENDING'

-- name: postpone_burst
-- A start folded into the open burst: its arguments, and the start postponed.
UPDATE workflows
SET args = :args, args_hash = :args_hash, next_run_at = :start_at,
    debounce_until = :debounce_until, updated_at = :now
WHERE run_id = :run_id AND status = 'PENDING'
RETURNING
       -- use: workflow_columns

-- name: record_debounced_start
INSERT INTO debounced_starts (key, run_id, started_at) VALUES (:key, :run_id, :now)
ON CONFLICT (key) DO NOTHING

-- name: ordering_line
-- The live executions of an ordering key, in line order (sagaway show: what one waits behind).
SELECT run_id, key, status, ordering_seq FROM workflows
WHERE ordering_key = :ordering_key AND ordering_key IS NOT NULL
  AND status IN ('PENDING', 'RUNNING', 'WAITING', 'SUSPENDED')
ORDER BY ordering_seq
LIMIT :limit

-- name: supersede
UPDATE workflows
SET status = 'TERMINATED', is_current = 0, ended_at = :now, updated_at = :now,
    lease_token = NULL, lease_owner = NULL, lease_expires_at = NULL, next_run_at = NULL,
    error = :error
WHERE run_id = :run_id

-- name: load_steps
SELECT run_id, call_id, kind, name, status, attempts, result, error, started_at, ended_at
FROM steps WHERE run_id = :run_id ORDER BY started_at, call_id

-- name: load_steps_many
SELECT run_id, call_id, kind, name, status, attempts, result, error, started_at, ended_at
FROM steps WHERE run_id IN (SELECT value FROM json_each(:run_ids))
ORDER BY run_id, started_at, call_id

-- name: check_owner
SELECT 1 FROM workflows WHERE run_id = :run_id AND lease_token = :token AND status = 'RUNNING'

-- name: record_step_owned
-- upsert_step fenced by the lease in the same statement: no row changes (rowcount 0) unless the
-- token still owns the RUNNING execution.
INSERT INTO steps (run_id, call_id, kind, name, status, attempts, result, error, started_at, ended_at)
SELECT :run_id, :call_id, :kind, :name, :status, :attempts, :result, :error, :started_at, :ended_at
WHERE EXISTS (SELECT 1 FROM workflows
              WHERE run_id = :run_id AND lease_token = :token AND status = 'RUNNING')
ON CONFLICT (run_id, call_id) DO UPDATE SET
    kind = excluded.kind, name = excluded.name, status = excluded.status,
    attempts = excluded.attempts, result = excluded.result, error = excluded.error,
    ended_at = excluded.ended_at

-- name: upsert_step
INSERT INTO steps (run_id, call_id, kind, name, status, attempts, result, error, started_at, ended_at)
VALUES (:run_id, :call_id, :kind, :name, :status, :attempts, :result, :error, :started_at, :ended_at)
ON CONFLICT (run_id, call_id) DO UPDATE SET
    kind = excluded.kind, name = excluded.name, status = excluded.status,
    attempts = excluded.attempts, result = excluded.result, error = excluded.error,
    ended_at = excluded.ended_at

-- name: finish_owned
-- A workflow may not COMPLETE over a cancel request it has not seen (cancel_seen): the same
-- statement that ends it checks, so a request is either refused (ended) or delivered.
UPDATE workflows
SET status = :status, result = :result, error = :error, ended_at = :now, updated_at = :now,
    lease_token = NULL, lease_owner = NULL, lease_expires_at = NULL, next_run_at = NULL
WHERE run_id = :run_id AND lease_token = :token AND status = 'RUNNING'
  AND (:status <> 'COMPLETED' OR :cancel_seen OR cancel_reason IS NULL)

-- name: cancel_pending
-- Why an owned finish was refused: the cancel request it had not seen (no row: lease lost).
SELECT cancel_reason FROM workflows
WHERE run_id = :run_id AND lease_token = :token AND status = 'RUNNING'
  AND cancel_reason IS NOT NULL

-- name: suspend_owned
UPDATE workflows
SET status = 'SUSPENDED', error = :error, updated_at = :now, next_run_at = :next_run_at,
    suspend_count = suspend_count + 1,
    lease_token = NULL, lease_owner = NULL, lease_expires_at = NULL
WHERE run_id = :run_id AND lease_token = :token AND status = 'RUNNING'

-- name: release_owned
UPDATE workflows
SET lease_token = NULL, lease_owner = NULL, lease_expires_at = NULL, next_run_at = :now,
    updated_at = :now
WHERE run_id = :run_id AND lease_token = :token AND status = 'RUNNING'

-- name: renew_lease
-- The repeated status list is the live index's own condition: SQLite uses a partial index only
-- when the query states that condition word for word, and the history must not be scanned.
-- A renewal never shortens a lease: one delayed on its way may land after a later one.
UPDATE workflows SET lease_expires_at = MAX(COALESCE(lease_expires_at, 0), :expires_at)
WHERE lease_token = :token AND status = 'RUNNING'
  AND status IN ('PENDING', 'RUNNING', 'WAITING', 'SUSPENDED')

-- fragment: due_scope
-- What a worker may take at all: not paused, of its queues and code versions.
AND paused_at IS NULL
AND (:any_queue OR queue IN (SELECT value FROM json_each(:queues)))
AND (:any_version OR code_version IN (SELECT value FROM json_each(:versions))
     OR (:unversioned AND code_version IS NULL))

-- fragment: due_filter
-- The conditions due_candidates and next_due share where a start can be: due_scope, a PENDING
-- execution's per-key limit, and its per-key order (none ahead of it in its key's line). The
-- parts that hold no start use due_scope alone: the per-key tests cost VM steps on every row
-- even where they cannot fail.
-- use: due_scope
AND (concurrency_key IS NULL OR status != 'PENDING'
     OR (SELECT COUNT(*) FROM workflows AS o
         WHERE o.concurrency_key = workflows.concurrency_key
           AND o.status IN ('RUNNING', 'WAITING', 'SUSPENDED')) < concurrency_limit)
AND (ordering_key IS NULL OR status != 'PENDING'
     OR NOT EXISTS (SELECT 1 FROM workflows AS ahead
         WHERE ahead.ordering_key = workflows.ordering_key AND ahead.ordering_key IS NOT NULL
           AND ahead.status IN ('PENDING', 'RUNNING', 'WAITING', 'SUSPENDED')
           AND ahead.ordering_seq < workflows.ordering_seq))

-- fragment: due_columns
run_id, lease_token, lease_owner, status, concurrency_key, concurrency_limit, next_run_at

-- name: due_candidates
-- In two parts, each read in the order of an index and cut at :limit, so a claim reads a few
-- rows however many are due: first the due work of started executions (timers, retries,
-- wake-ups, expired leases: work in progress keeps its place), by next_run_at; then PENDING
-- starts, higher priority first, by fair pass within a level (workflows_pending_order).
SELECT run_id, lease_token, lease_owner, status, concurrency_key, concurrency_limit FROM (
    SELECT * FROM (
        SELECT 0 AS part, 0 AS level, 0 AS pass,
               -- use: due_columns
        FROM workflows INDEXED BY workflows_live
        WHERE is_current = 1 AND status IN ('PENDING', 'RUNNING', 'WAITING', 'SUSPENDED')
          AND status IN ('RUNNING', 'WAITING', 'SUSPENDED') AND next_run_at <= :now
          AND (status <> 'RUNNING' OR lease_expires_at IS NULL OR lease_expires_at <= :now)
          -- use: due_scope
        ORDER BY next_run_at
        LIMIT :limit)
    UNION ALL
    SELECT * FROM (
        SELECT 1 AS part, -priority AS level, fair_pass AS pass,
               -- use: due_columns
        FROM workflows
        WHERE status = 'PENDING' AND is_current = 1
          AND (lease_expires_at IS NULL OR lease_expires_at <= :now)
          AND next_run_at <= :now
          -- use: due_filter
        ORDER BY priority DESC, fair_pass, next_run_at
        LIMIT :limit))
ORDER BY part, level, pass, next_run_at
LIMIT :limit

-- name: start_place
-- How many due PENDING starts a claim takes before :run_id while it is PENDING: those of a
-- higher level, and of its level with an earlier pass (or the same, due earlier), as
-- claim_order takes them. Counted on workflows_pending_order (for `sagaway show`).
SELECT (SELECT COUNT(*) FROM workflows AS o
        WHERE o.status = 'PENDING' AND o.next_run_at <= :now AND o.run_id <> w.run_id
          AND (o.priority > w.priority
               OR (o.priority = w.priority
                   AND (COALESCE(o.fair_pass, -1) < COALESCE(w.fair_pass, -1)
                        OR (COALESCE(o.fair_pass, -1) = COALESCE(w.fair_pass, -1)
                            AND o.next_run_at < w.next_run_at))))) AS ahead
FROM workflows AS w
WHERE w.run_id = :run_id AND w.status = 'PENDING'

-- name: next_due
-- The earliest of: the leases and start times of PENDING and RUNNING executions (what runs or
-- is about to), and the first wake-up of the WAITING and of the SUSPENDED ones, read in the
-- order of workflows_live and cut at the first that passes the filter. So a worker's look
-- between two scans reads a few rows however many executions wait: a MIN over every live row
-- read each waiting one, a million each second with a million waits. Each part names one
-- status and a condition on next_run_at (`> -9e999`: any time; the literal is -infinity): with
-- the status alone beside the index's own IN list, SQLite seeks every status of the list and
-- filters, which reads the waiting rows again. Only the PENDING parts test the per-key limits
-- and lines (due_filter): the others hold no start.
SELECT MIN(t) FROM (
    SELECT MIN(COALESCE(lease_expires_at, next_run_at)) AS t FROM workflows INDEXED BY workflows_live
    WHERE is_current = 1 AND status IN ('PENDING', 'RUNNING', 'WAITING', 'SUSPENDED')
      AND status = 'PENDING' AND next_run_at > -9e999
      AND (lease_owner IS NULL OR lease_owner != :owner)
      -- use: due_filter
    UNION ALL
    SELECT MIN(lease_expires_at) AS t FROM workflows INDEXED BY workflows_live
    WHERE is_current = 1 AND status IN ('PENDING', 'RUNNING', 'WAITING', 'SUSPENDED')
      AND status = 'PENDING' AND next_run_at IS NULL
      AND (lease_owner IS NULL OR lease_owner != :owner)
      -- use: due_filter
    UNION ALL
    SELECT MIN(COALESCE(lease_expires_at, next_run_at)) AS t FROM workflows INDEXED BY workflows_live
    WHERE is_current = 1 AND status IN ('PENDING', 'RUNNING', 'WAITING', 'SUSPENDED')
      AND status = 'RUNNING' AND next_run_at > -9e999
      AND (lease_owner IS NULL OR lease_owner != :owner)
      -- use: due_scope
    UNION ALL
    SELECT MIN(lease_expires_at) AS t FROM workflows INDEXED BY workflows_live
    WHERE is_current = 1 AND status IN ('PENDING', 'RUNNING', 'WAITING', 'SUSPENDED')
      AND status = 'RUNNING' AND next_run_at IS NULL
      AND (lease_owner IS NULL OR lease_owner != :owner)
      -- use: due_scope
    UNION ALL
    SELECT * FROM (
        SELECT next_run_at AS t FROM workflows INDEXED BY workflows_live
        WHERE is_current = 1 AND status IN ('PENDING', 'RUNNING', 'WAITING', 'SUSPENDED')
          AND status = 'WAITING' AND next_run_at > -9e999
          AND (lease_owner IS NULL OR lease_owner != :owner)
          -- use: due_scope
        ORDER BY next_run_at
        LIMIT 1)
    UNION ALL
    SELECT * FROM (
        SELECT next_run_at AS t FROM workflows INDEXED BY workflows_live
        WHERE is_current = 1 AND status IN ('PENDING', 'RUNNING', 'WAITING', 'SUSPENDED')
          AND status = 'SUSPENDED' AND next_run_at > -9e999
          AND (lease_owner IS NULL OR lease_owner != :owner)
          -- use: due_scope
        ORDER BY next_run_at
        LIMIT 1))

-- name: running_with_key
-- How many executions of a per-key limit's key run (started, not ended).
SELECT COUNT(*) FROM workflows
WHERE concurrency_key = :concurrency_key AND status IN ('RUNNING', 'WAITING', 'SUSPENDED')

-- name: claim
UPDATE workflows
SET status = 'RUNNING', lease_token = :new_token, lease_owner = :owner,
    lease_expires_at = :expires_at, updated_at = :now, waiting_for = NULL
WHERE run_id = :run_id AND lease_token IS :old_token
  AND status IN ('PENDING', 'RUNNING', 'SUSPENDED', 'WAITING')

-- name: end_by_request
UPDATE workflows
SET status = :status, ended_at = :now, updated_at = :now, error = :error,
    lease_token = NULL, lease_owner = NULL, lease_expires_at = NULL, next_run_at = NULL
WHERE run_id = :run_id AND status IN ('PENDING', 'RUNNING', 'SUSPENDED', 'WAITING')

-- name: request_cancel
-- Recorded once (the first reason stays); a run no process holds becomes due at once, so it
-- runs to its next durable call or wait and sees the cancellation there.
UPDATE workflows
SET cancel_reason = COALESCE(cancel_reason, :reason), updated_at = :now,
    next_run_at = CASE WHEN status IN ('WAITING', 'SUSPENDED') THEN :now ELSE next_run_at END
WHERE run_id = :run_id AND status IN ('PENDING', 'RUNNING', 'SUSPENDED', 'WAITING')

-- name: log_cancel_request
-- Every request, accepted or not, in the transaction that decided it.
INSERT INTO cancel_requests (run_id, reason, requested_at, accepted)
SELECT run_id, :reason, :now, :accepted FROM workflows WHERE run_id = :run_id

-- name: list_cancel_requests
SELECT reason, requested_at, accepted FROM cancel_requests
WHERE run_id = :run_id ORDER BY seq

-- name: cancel_requests
SELECT run_id, cancel_reason FROM workflows
WHERE run_id IN (SELECT value FROM json_each(:run_ids))
  AND cancel_reason IS NOT NULL

-- name: retry_now
UPDATE workflows SET next_run_at = :now, updated_at = :now
WHERE run_id = :run_id AND status = 'SUSPENDED'

-- name: count_by_status
-- Counted from the two partial indexes (live, ended by status): ten times faster than grouping
-- the table's rows with a long history.
SELECT status, COUNT(*) FROM workflows
WHERE is_current = 1 AND status IN ('PENDING', 'RUNNING', 'WAITING', 'SUSPENDED')
GROUP BY status
UNION ALL
SELECT status, COUNT(*) FROM workflows
WHERE is_current = 1 AND status IN ('COMPLETED', 'FAILED', 'CANCELLED', 'TERMINATED')
GROUP BY status

-- name: signal_target
SELECT
       -- use: workflow_columns
FROM workflows WHERE key = :key AND is_current = 1

-- name: insert_signal
INSERT INTO signals (run_id, name, payload, dedupe_id, created_at)
VALUES (:run_id, :name, :payload, :dedupe_id, :now)
ON CONFLICT (run_id, name, dedupe_id) WHERE dedupe_id IS NOT NULL DO NOTHING

-- name: wake_waiting
UPDATE workflows SET next_run_at = :now, updated_at = :now
WHERE run_id = :run_id AND status = 'WAITING' AND waiting_for = :waiting_for

-- name: pending_signals
SELECT id, payload FROM signals
WHERE run_id = :run_id AND name = :name AND consumed_at IS NULL
ORDER BY id

-- name: consume_signal
UPDATE signals SET consumed_call = :call_id, consumed_at = :now WHERE id = :id

-- name: reject_signal
UPDATE signals SET consumed_at = :now, rejected = :error WHERE id = :id

-- name: wait_owned
-- A workflow deadline (deadline_at) ends a wait too: the run becomes due by then at the latest.
-- A cancel request that came while it ran makes it due at once.
UPDATE workflows
SET status = 'WAITING', waiting_for = :waiting_for,
    next_run_at = CASE WHEN cancel_reason IS NOT NULL THEN :now
                       WHEN deadline_at IS NULL THEN :next_run_at
                       WHEN :next_run_at IS NULL THEN deadline_at
                       ELSE MIN(:next_run_at, deadline_at) END,
    updated_at = :now, lease_token = NULL, lease_owner = NULL, lease_expires_at = NULL
WHERE run_id = :run_id AND lease_token = :token AND status = 'RUNNING'

-- name: wake_waiters
-- Every execution WAITING for the one that ended (as its child) becomes due at once: the parent
-- that created it and any other that attached to it under the same key.
UPDATE workflows SET next_run_at = :now, updated_at = :now
WHERE status = 'WAITING'
  AND waiting_for = 'child:' || (SELECT key FROM workflows WHERE run_id = :run_id)
  AND is_current = 1

-- name: list_signals
SELECT id, name, payload, dedupe_id, created_at, consumed_call, consumed_at, rejected
FROM signals WHERE run_id = :run_id ORDER BY id

-- ---------------------------------------------------------------- fork (store/_fork.py)

-- name: fork_workflow
-- A new PENDING execution under :key with the name, arguments and queue of the ended execution
-- :source_run_id, and the code version of the forking process; nothing if the key is taken or
-- the source is not ended.
INSERT INTO workflows (
    -- use: forked_columns
)
SELECT :run_id, :key, 1, name, args, args_hash, 'PENDING', NULL, :now, :now, NULL, NULL, NULL,
       :now, queue, :key_space, :code_version, priority, fairness_key, fairness_weight,
       -- its place: its level's virtual time now (the oldest PENDING start's pass there)
       COALESCE((SELECT MIN(p.fair_pass) FROM workflows AS p
                 WHERE p.status = 'PENDING' AND p.priority = workflows.priority
                   AND p.fair_pass IS NOT NULL), 0)
FROM workflows
WHERE run_id = :source_run_id AND status IN ('COMPLETED', 'FAILED', 'CANCELLED', 'TERMINATED')
ON CONFLICT (key) WHERE is_current = 1 DO NOTHING

-- name: fork_lost_children
-- The kept child starts (steps :call_ids of :source_run_id) whose child has no execution: a
-- purge took it after the fork looked, and a fork keeping that start would read an end that is
-- gone, so none is made (the writer runs one transaction at a time: nothing purges meanwhile).
SELECT s.call_id FROM steps s
WHERE s.run_id = :source_run_id AND s.call_id IN (SELECT value FROM json_each(:call_ids))
  AND s.kind = 'child' AND s.result IS NOT NULL
  AND NOT EXISTS (
      SELECT 1 FROM workflows c WHERE c.key = json_extract(s.result, '$') AND c.is_current = 1)

-- name: fork_steps
INSERT INTO steps (run_id, call_id, kind, name, status, attempts, result, error, started_at, ended_at)
SELECT :run_id, call_id, kind, name, status, attempts, result, error, started_at, ended_at
FROM steps
WHERE run_id = :source_run_id AND call_id IN (SELECT value FROM json_each(:call_ids))
ON CONFLICT (run_id, call_id) DO NOTHING

-- name: fork_args
-- A fork's arguments re-sealed for its run by the forking process's codec (store/_fork.py).
UPDATE workflows SET args = :args WHERE run_id = :run_id

-- name: fork_step_payloads
UPDATE steps SET result = :result, error = :error
WHERE run_id = :run_id AND call_id = :call_id

-- ---------------------------------------------------------------- retention (schema v7)
-- A purge batch: the oldest ended executions of the given statuses that ended before the
-- cutoff (purge_select), then their steps, signals and rows (purge_steps, purge_signals,
-- purge_workflows), in one short write transaction of the writer thread. An ended workflow is
-- kept while a live one may still read its outcome: its parent (which reads the child's end when
-- it resumes, and may not have recorded the child's start yet), and every live workflow whose
-- recorded child start names its key (one that attached to it under a shared key, a fork that
-- kept the start), found through steps_child_key: the start's result is the key as JSON, as
-- json_quote spells it. The literal status list matches the partial index workflows_ended.

-- name: purgeable
-- The ended executions a purge may delete (purge_select takes the oldest, count_purgeable
-- counts them all): a fragment the two queries use.
SELECT w.run_id FROM workflows w
WHERE w.status IN ('COMPLETED', 'FAILED', 'CANCELLED', 'TERMINATED')
  AND w.status IN (SELECT value FROM json_each(:statuses))
  AND w.ended_at < :before
  AND NOT EXISTS (
      SELECT 1 FROM workflows p
      WHERE p.key = w.parent_key AND p.is_current = 1
        AND p.status IN ('PENDING', 'RUNNING', 'WAITING', 'SUSPENDED'))
  AND NOT EXISTS (
      SELECT 1 FROM steps s JOIN workflows r ON r.run_id = s.run_id
      WHERE s.kind = 'child' AND s.result = json_quote(w.key)
        AND r.status IN ('PENDING', 'RUNNING', 'WAITING', 'SUSPENDED'))

-- name: purge_select
-- use: purgeable
ORDER BY w.ended_at
LIMIT :limit

-- name: purge_steps
DELETE FROM steps WHERE run_id IN (SELECT value FROM json_each(:run_ids))

-- name: purge_signals
DELETE FROM signals WHERE run_id IN (SELECT value FROM json_each(:run_ids))

-- name: purge_debounced_starts
-- The starts folded into purged executions (a start retried after that creates anew).
DELETE FROM debounced_starts WHERE run_id IN (SELECT value FROM json_each(:run_ids))

-- name: purge_workflows
DELETE FROM workflows WHERE run_id IN (SELECT value FROM json_each(:run_ids))

-- name: count_purgeable
SELECT count(*) FROM (
    -- use: purgeable
)
-- ---------------------------------------------------------------- schedules

-- name: put_schedule
-- Create or update a schedule. An update keeps the next tick when the expression and time zone
-- are the same (ticks missed meanwhile are then caught up), unless it resumes a paused one (the
-- ticks of a pause are never run); keep_paused leaves an operator's pause as it is.
INSERT INTO schedules (id, workflow, args, queue, cron, timezone, catch_up, paused, next_tick_at,
                       created_at, updated_at)
VALUES (:id, :workflow, :args, :queue, :cron, :timezone, :catch_up, :paused,
        :next_tick_at, :now, :now)
ON CONFLICT (id) DO UPDATE SET
    workflow = excluded.workflow, args = excluded.args, queue = excluded.queue,
    cron = excluded.cron, timezone = excluded.timezone, catch_up = excluded.catch_up,
    paused = CASE WHEN :keep_paused THEN schedules.paused ELSE excluded.paused END,
    next_tick_at = CASE
        WHEN schedules.cron = excluded.cron AND schedules.timezone = excluded.timezone
             AND NOT (schedules.paused AND NOT (CASE WHEN :keep_paused THEN schedules.paused ELSE excluded.paused END))
        THEN schedules.next_tick_at ELSE excluded.next_tick_at END,
    updated_at = excluded.updated_at

-- name: get_schedule
SELECT id, workflow, args, queue, cron, timezone, catch_up, paused, next_tick_at, created_at, updated_at, last_tick_at
FROM schedules WHERE id = :id

-- name: list_schedules
SELECT id, workflow, args, queue, cron, timezone, catch_up, paused, next_tick_at, created_at, updated_at, last_tick_at
FROM schedules ORDER BY id

-- name: set_schedule_paused
-- Resuming a paused schedule moves its next tick to the first one from now on.
UPDATE schedules
SET next_tick_at = CASE WHEN paused AND NOT :paused THEN :next_tick_at ELSE next_tick_at END,
    paused = :paused, updated_at = :now
WHERE id = :id

-- name: delete_schedule
DELETE FROM schedules WHERE id = :id

-- name: advance_schedule
-- The compare-and-set of a tick: only the scheduler that read next_tick_at = tick_at wins.
UPDATE schedules
SET next_tick_at = :next_tick_at, last_tick_at = COALESCE(:last_tick_at, last_tick_at)
WHERE id = :id AND next_tick_at = :tick_at AND NOT paused

-- ---------------------------------------------------------------- inspection

-- name: list_attempt_errors
-- The errors of the attempts a step row no longer holds, and the error of the attempt it holds
-- (see migration "superseded attempt errors"); a row of attempt_errors written before that
-- version for the attempt the step row holds gives way to the step row.
SELECT a.call_id, a.attempt, a.error, a.at FROM attempt_errors a
WHERE a.run_id = :run_id
  AND NOT EXISTS (SELECT 1 FROM steps s
                  WHERE s.run_id = a.run_id AND s.call_id = a.call_id
                    AND s.attempts = a.attempt AND s.error IS NOT NULL)
UNION ALL
SELECT call_id, attempts, error, COALESCE(ended_at, started_at) FROM steps
WHERE run_id = :run_id AND error IS NOT NULL
ORDER BY 1, 2

-- ---------------------------------------------------------------- cluster-wide queue limits
-- name: queue_limit_row
INSERT INTO queue_limits (queue) VALUES (:queue) ON CONFLICT (queue) DO NOTHING

-- name: lock_queue_limit
SELECT next_start_at FROM queue_limits WHERE queue = :queue

-- name: holds_queue_slot
SELECT 1 FROM queue_slots WHERE queue = :queue AND holder = :holder AND expires_at > :now

-- name: drop_expired_slots
DELETE FROM queue_slots WHERE queue = :queue AND expires_at <= :now

-- name: count_queue_slots
SELECT count(*) FROM queue_slots WHERE queue = :queue

-- name: take_queue_slot
INSERT INTO queue_slots (queue, holder, expires_at) VALUES (:queue, :holder, :expires_at)
ON CONFLICT (queue, holder) DO UPDATE SET expires_at = excluded.expires_at

-- name: space_queue_starts
UPDATE queue_limits SET next_start_at = :next_start_at WHERE queue = :queue

-- name: renew_queue_slot
UPDATE queue_slots SET expires_at = :expires_at
WHERE queue = :queue AND holder = :holder AND expires_at > :now

-- name: release_queue_slot
DELETE FROM queue_slots WHERE queue = :queue AND holder = :holder

-- name: drop_expired_waiters
DELETE FROM queue_waiters WHERE queue = :queue AND expires_at <= :now

-- name: waiter_since
SELECT since FROM queue_waiters
WHERE queue = :queue AND run_id = :run_id AND call_id = :call_id

-- name: waiters_ahead
-- The live waiters of the queue that go before this call: a higher priority, or the same one
-- and waiting since earlier (ties by run and call id). A waiter whose workflow is no longer
-- live (cancelled, ended, suspended) is passed over at once, before its row expires.
SELECT count(*) FROM queue_waiters q
WHERE q.queue = :queue AND q.expires_at > :now
  AND (q.priority > :priority
       OR (q.priority = :priority AND (q.since < :since
           OR (q.since = :since AND (q.run_id, q.call_id) < (:run_id, :call_id)))))
  AND EXISTS (SELECT 1 FROM workflows w
              WHERE w.run_id = q.run_id AND w.status IN ('PENDING', 'RUNNING', 'WAITING'))

-- name: keep_waiter
INSERT INTO queue_waiters (queue, run_id, call_id, priority, since, expires_at)
VALUES (:queue, :run_id, :call_id, :priority, :since, :expires_at)
ON CONFLICT (queue, run_id, call_id)
DO UPDATE SET priority = excluded.priority, expires_at = excluded.expires_at

-- name: drop_waiter
DELETE FROM queue_waiters
WHERE queue = :queue AND run_id = :run_id AND call_id = :call_id

-- name: queue_place
-- Where the execution's call waits in a cluster queue's line, if one does: the queue, the
-- call's priority and how many live waiters go before it (as waiters_ahead counts them).
SELECT q.queue, q.priority,
       (SELECT count(*) FROM queue_waiters o
        WHERE o.queue = q.queue AND o.expires_at > :now
-- use: waits_before_q
        ) AS ahead
FROM queue_waiters q
WHERE q.run_id = :run_id AND q.expires_at > :now
ORDER BY q.since, q.queue, q.call_id
LIMIT 1

-- name: wake_queue_waiter
-- A slot was given back: the workflow of the queue's first live waiter (by priority, then
-- waiting time: the one call that may take it) looks again now, instead of at its next
-- poll; with no waiter recorded, the waiting workflow of the highest priority
-- (of those, the one that has waited longest).
UPDATE workflows SET next_run_at = :now
WHERE status = 'WAITING' AND waiting_for = :waiting_for AND next_run_at > :now
  AND run_id = COALESCE(
    (SELECT q.run_id FROM queue_waiters q
     WHERE q.queue = :queue AND q.expires_at > :now
       AND EXISTS (SELECT 1 FROM workflows w
                   WHERE w.run_id = q.run_id AND w.status IN ('PENDING', 'RUNNING', 'WAITING'))
     ORDER BY q.priority DESC, q.since, q.run_id, q.call_id
     LIMIT 1),
    (SELECT run_id FROM workflows
        WHERE status = 'WAITING' AND waiting_for = :waiting_for AND next_run_at > :now
          AND status IN ('PENDING', 'RUNNING', 'WAITING', 'SUSPENDED')
        ORDER BY priority DESC, updated_at, run_id
        LIMIT 1))

-- ---------------------------------------------------------------- audit trail (store/_audit.py)
-- An entry about an execution reads its run id and key from the row itself; `at` is the
-- column's default, the database's clock. A repeated entry_id (a call tried again) adds nothing.

-- name: insert_audit_for_run
INSERT INTO audit_log (entry_id, actor, on_behalf_of, action, run_id, target, reason, details)
SELECT :entry_id, :actor, :on_behalf_of, :action, run_id, key, :reason, :details
FROM workflows WHERE run_id = :run_id
ON CONFLICT (entry_id) DO NOTHING

-- name: insert_audit
INSERT INTO audit_log (entry_id, actor, on_behalf_of, action, target, reason, details)
VALUES (:entry_id, :actor, :on_behalf_of, :action, :target, :reason, :details)
ON CONFLICT (entry_id) DO NOTHING

-- ---------------------------------------------------------------- pauses (schema v20)

-- name: pause_workflow
-- No worker claims it now (due_filter); its owner, if any, hears of it (paused_runs) and stops
-- before its next durable call. The first pause's time stays.
UPDATE workflows SET paused_at = COALESCE(paused_at, :now), updated_at = :now
WHERE run_id = :run_id AND status IN ('PENDING', 'RUNNING', 'SUSPENDED', 'WAITING')

-- name: resume_workflow
-- Due as it was; one that became due while paused is due now.
UPDATE workflows
SET paused_at = NULL, updated_at = :now,
    next_run_at = CASE WHEN next_run_at <= :now THEN :now ELSE next_run_at END
WHERE run_id = :run_id AND paused_at IS NOT NULL

-- name: paused_runs
SELECT run_id FROM workflows
WHERE run_id IN (SELECT value FROM json_each(:run_ids)) AND paused_at IS NOT NULL

-- name: pause_calls
INSERT INTO paused_calls (kind, name, reason, paused_at) VALUES (:kind, :name, :reason, :now)
ON CONFLICT (kind, name) DO NOTHING

-- name: resume_calls
DELETE FROM paused_calls WHERE kind = :kind AND name = :name

-- name: wake_paused_calls
-- Resumed: the workflows waiting for it look again now.
UPDATE workflows SET next_run_at = :now, updated_at = :now
WHERE status = 'WAITING' AND waiting_for = :waiting_for
  AND status IN ('PENDING', 'RUNNING', 'WAITING', 'SUSPENDED')

-- name: list_paused_calls
SELECT kind, name, reason, paused_at FROM paused_calls ORDER BY kind, name
-- ---------------------------------------------------------------- events, streams, attributes

-- name: step_recorded
SELECT 1 FROM steps WHERE run_id = :run_id AND call_id = :call_id

-- name: insert_output
-- The execution's next seq, and the next position of the stream (or of the event's key): both
-- a lookup at the end of an index; the lease makes the owner the only writer.
INSERT INTO outputs (run_id, seq, call_id, kind, name, position, value, at)
VALUES (
    :run_id,
    coalesce((SELECT max(seq) FROM outputs WHERE run_id = :run_id), 0) + 1,
    :call_id, :kind, :name,
    coalesce((SELECT max(position) FROM outputs
              WHERE run_id = :run_id AND kind = :kind AND name = :name), -1) + 1,
    :value, :now)

-- name: upsert_search_attribute
INSERT INTO search_attributes (run_id, name, kind, str_value, num_value, created_at)
SELECT run_id, :name, :kind, :text, :number, created_at FROM workflows WHERE run_id = :run_id
ON CONFLICT (run_id, name) DO UPDATE SET
    kind = excluded.kind, str_value = excluded.str_value, num_value = excluded.num_value

-- name: read_outputs
SELECT seq, call_id, kind, name, position, value, at FROM outputs
WHERE run_id = :run_id AND seq > :after ORDER BY seq LIMIT :limit

-- name: read_stream
SELECT seq, call_id, kind, name, position, value, at FROM outputs
WHERE run_id = :run_id AND kind = 'stream' AND name = :stream AND position >= :offset
ORDER BY position LIMIT :limit

-- name: get_event
SELECT seq, call_id, kind, name, position, value, at FROM outputs
WHERE run_id = :run_id AND kind = 'event' AND name = :key
ORDER BY position DESC LIMIT 1

-- name: list_search_attributes
SELECT name, kind, str_value, num_value FROM search_attributes
WHERE run_id = :run_id ORDER BY name

-- name: insert_attribute_write
-- Each attribute a publication sets, in order, with its step (schema v21): a fork rebuilds
-- its search attributes from the writes of the steps it keeps.
INSERT INTO attribute_writes (run_id, seq, call_id, name, kind, str_value, num_value)
VALUES (
    :run_id,
    coalesce((SELECT max(seq) FROM attribute_writes WHERE run_id = :run_id), 0) + 1,
    :call_id, :name, :kind, :text, :number)

-- name: fork_outputs
-- What the kept publish steps of the source wrote, in the order they wrote it (store/_fork.py
-- numbers the copies again: seq from 1, each stream's positions from 0).
SELECT seq, call_id, kind, name, position, value, at FROM outputs
WHERE run_id = :source_run_id AND call_id IN (SELECT value FROM json_each(:call_ids))
ORDER BY seq

-- name: fork_output
INSERT INTO outputs (run_id, seq, call_id, kind, name, position, value, at)
VALUES (:run_id, :seq, :call_id, :kind, :name, :position, :value, :at)

-- name: fork_attribute_writes
SELECT call_id, name, kind, str_value, num_value FROM attribute_writes
WHERE run_id = :source_run_id AND call_id IN (SELECT value FROM json_each(:call_ids))
ORDER BY seq
