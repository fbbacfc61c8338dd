-- Written for both SQLite and PostgreSQL.
-- Rollback jobs of many runs (`scope_jobs.py`).

-- name: columns
-- What a `ScopeJobRow` is read from, in its order.
job_id, selection, within_tenant, state, actor, principal, approve_compensations, attempts, contained,
created_at, started_at, finished_at, report, error, concurrency

-- name: insert_scope_job
INSERT INTO scope_jobs ({columns}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)

-- name: get_scope_job
SELECT {columns} FROM scope_jobs WHERE job_id = ?

-- name: unfinished_scope_jobs
-- Jobs queued or left running, oldest first.
SELECT {columns} FROM scope_jobs WHERE state <> 'done' ORDER BY created_at, job_id

-- name: start_scope_job
UPDATE scope_jobs SET state = 'running', started_at = ? WHERE job_id = ?

-- name: finish_scope_job
UPDATE scope_jobs SET state = 'done', finished_at = ?, report = ?, error = ? WHERE job_id = ?

-- name: requeue_scope_job
UPDATE scope_jobs SET state = 'queued' WHERE job_id = ? AND state <> 'done'
