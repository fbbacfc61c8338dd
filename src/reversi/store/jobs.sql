-- Written for both SQLite and PostgreSQL.
-- Rollback jobs (`jobs.py`).

-- name: columns
-- What a `JobRow` is read from, in its order.
job_id, run_id, state, actor, approve_compensations, attempts, created_at, started_at, finished_at,
starts, current_step, report, error, principal, scope, concurrency, current_steps

-- name: insert_job
INSERT INTO rollback_jobs ({columns}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)

-- name: get_job
SELECT {columns} FROM rollback_jobs WHERE job_id = ?

-- name: latest_job
SELECT {columns} FROM rollback_jobs WHERE run_id = ? ORDER BY created_at DESC, job_id DESC LIMIT 1

-- name: unfinished_jobs
-- Jobs queued or left running, oldest first.
SELECT {columns} FROM rollback_jobs WHERE state <> 'done' ORDER BY created_at, job_id

-- name: start_job
UPDATE rollback_jobs SET state = 'running', started_at = ?, starts = starts + 1, current_step = ?,
current_steps = NULL WHERE job_id = ?

-- name: record_progress
UPDATE rollback_jobs SET current_step = ?, current_steps = ?, report = ? WHERE job_id = ?

-- name: finish_job
UPDATE rollback_jobs SET state = 'done', finished_at = ?, current_step = NULL, current_steps = NULL,
report = ?, error = ? WHERE job_id = ?

-- name: requeue_job
UPDATE rollback_jobs SET state = 'queued' WHERE job_id = ? AND state = 'running'
