-- Written for both SQLite and PostgreSQL.
-- Retention (`reversi prune`): what keeps each run of a batch {runs}, and the deletion of a run
-- (`retention.py`).

-- name: last_events
SELECT run_id, MAX(seq), MAX(at) FROM events WHERE run_id IN ({runs}) GROUP BY run_id

-- name: pending_approvals
SELECT DISTINCT a.run_id FROM approvals a WHERE a.run_id IN ({runs}) AND NOT EXISTS (
    SELECT 1 FROM events e WHERE e.approval_id = a.approval_id AND e.type IN ('approval_granted', 'approval_denied'))

-- name: unfinished_jobs
SELECT DISTINCT run_id FROM rollback_jobs WHERE run_id IN ({runs}) AND state <> 'done'

-- name: held_leases
-- Leases held within their time on the store's clock ({now}: `Dialect.now_s`).
SELECT run_id FROM rollback_leases WHERE run_id IN ({runs}) AND until IS NOT NULL AND until >= {now}

-- name: delete_rows
-- The rows of a run in one of `RUN_TABLES`, {table}.
DELETE FROM {table} WHERE run_id = ?
