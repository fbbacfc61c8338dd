-- Written for both SQLite and PostgreSQL.
-- Runs, their steps and the journal of events (`queries.py`).

-- name: run_columns
-- What a `RunRecord` is read from, in its order.
run_id, principal, mode, actor, tenant, environment, labels, created_at

-- name: step_columns
-- What a `StepRecord` is read from, in its order.
run_id, step, tool, args, depends_on, compensation_needs_approval, manifest_digest, dup_key

-- name: event_columns
-- What an `Event` is read from, in its order.
run_id, seq, step, type, at, actor, data

-- name: status_events
-- The event types that set a step's status (`resolved` sets the one in its data).
'intended', 'succeeded', 'failed', 'uncertain', 'resolved', 'compensating', 'compensated', 'compensation_failed'

-- name: get_run
SELECT {run_columns} FROM runs WHERE run_id = ?

-- name: insert_run
INSERT INTO runs ({run_columns}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)

-- name: list_runs
-- Runs newest first; each slot holds its filter when it is asked for, {contains} one
-- `runs_containing_*` per text searched for.
SELECT {run_columns} FROM runs
WHERE 1 = 1 {opened_before} {of_actor} {of_tenant} {contains} {since} {before}
ORDER BY created_at DESC, run_id DESC {limit}

-- name: runs_created_before
AND created_at < ?

-- name: runs_of_actor
AND actor = ?

-- name: runs_of_tenant
AND tenant = ?

-- name: runs_of_principal
AND principal = ?

-- name: runs_created_since
AND created_at >= ?

-- name: runs_before
-- Newest first, after the (created_at, created_at, run_id) of the last run of the previous page.
AND (created_at < ? OR (created_at = ? AND run_id < ?))

-- name: runs_containing_any
-- A text, whatever its case, in the run's id, actor, tenant, environment, labels or its steps'
-- tools; each `?` takes the same pattern.
AND (LOWER(run_id) LIKE ? ESCAPE '\' OR LOWER(actor) LIKE ? ESCAPE '\' OR LOWER(tenant) LIKE ? ESCAPE '\'
     OR LOWER(environment) LIKE ? ESCAPE '\' OR LOWER(labels) LIKE ? ESCAPE '\'
     OR EXISTS (SELECT 1 FROM steps s WHERE s.run_id = runs.run_id AND LOWER(s.tool) LIKE ? ESCAPE '\'))

-- name: runs_containing_actor
AND (LOWER(actor) LIKE ? ESCAPE '\')

-- name: runs_containing_tenant
AND (LOWER(tenant) LIKE ? ESCAPE '\')

-- name: runs_opened_before
-- Runs opened before a time, oldest first, in batches; {after} holds `runs_after` past the first.
SELECT {run_columns} FROM runs WHERE created_at < ? {after} ORDER BY created_at, run_id LIMIT ?

-- name: runs_after
-- Oldest first, after the (created_at, created_at, run_id) of the last run of the previous batch.
AND (created_at > ? OR (created_at = ? AND run_id > ?))

-- name: count_runs
SELECT COUNT(*) FROM runs WHERE created_at < ? {of_tenant} {of_principal}

-- name: insert_step
INSERT INTO steps ({step_columns}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)

-- name: insert_next_step
-- The run's next step, numbered by this statement; no row, and no step, for a run that is gone.
INSERT INTO steps ({step_columns})
SELECT ?, COALESCE((SELECT MAX(step) FROM steps WHERE run_id = ?), -1) + 1, ?, ?, ?, ?, ?, ?
FROM runs WHERE run_id = ? RETURNING step

-- name: step_record
SELECT {step_columns} FROM steps WHERE run_id = ? AND step = ?

-- name: step_records
SELECT {step_columns} FROM steps WHERE run_id = ? ORDER BY step

-- name: steps_with_dup_key
SELECT {step_columns} FROM steps WHERE dup_key = ?

-- name: steps_of_runs
SELECT {step_columns} FROM steps WHERE run_id IN ({runs}) ORDER BY run_id, step

-- name: step_count
SELECT COUNT(*) FROM steps WHERE run_id = ?

-- name: insert_first_event
-- The first event of a write, numbered on from the run's last `seq` by this statement.
INSERT INTO events ({event_columns}, approval_id)
SELECT ?, COALESCE(MAX(seq), -1) + 1, ?, ?, ?, ?, ?, ? FROM events WHERE run_id = ? RETURNING seq

-- name: insert_event
INSERT INTO events ({event_columns}, approval_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?)

-- name: run_events
SELECT {event_columns} FROM events WHERE run_id = ? {after} ORDER BY seq {limit}

-- name: events_after
AND seq > ?

-- name: checkpoint_events
SELECT {event_columns} FROM events WHERE run_id = ? AND step IS NULL AND type = ? ORDER BY seq

-- name: step_events
{run_guard} SELECT {event_columns} FROM events WHERE run_id = ? AND step = ? {run_guarded} ORDER BY seq

-- name: export
-- Every run's events, run by run (oldest run first); {since} holds `export_since` when asked for.
SELECT e.run_id, e.seq, e.step, e.type, e.at, e.actor, e.data FROM events e
JOIN runs r ON r.run_id = e.run_id {since}
ORDER BY r.created_at, e.run_id, e.seq

-- name: export_since
WHERE e.at >= ?

-- name: run_summary
-- The type and data of each step's last status event.
SELECT e.type, e.data FROM events e
JOIN (SELECT step, MAX(seq) AS seq FROM events
      WHERE run_id = ? AND step IS NOT NULL AND type IN ({status_events}) GROUP BY step) last
  ON e.run_id = ? AND e.seq = last.seq

-- name: runs_with_steps_in
-- The runs with a step whose last status event is one of {statuses}.
SELECT DISTINCT e.type, e.run_id FROM events e
JOIN (SELECT run_id, step, MAX(seq) AS seq FROM events
      WHERE step IS NOT NULL AND type IN ({status_events}) GROUP BY run_id, step) last
  ON e.run_id = last.run_id AND e.seq = last.seq
JOIN runs r ON r.run_id = e.run_id
WHERE e.type IN ({statuses}) {of_tenant} {of_principal}

-- name: steps_in_of_tenant
AND r.tenant = ?

-- name: steps_in_of_principal
AND r.principal = ?

-- name: step_statuses
-- The status events of some steps of a run, in order: the last one of each step decides.
SELECT step, type, data FROM events WHERE run_id = ? AND step IN ({steps}) AND type IN ({status_events})
ORDER BY seq

-- name: snapshot_events
SELECT step, type, at, actor, data FROM events WHERE run_id = ? AND step IS NOT NULL ORDER BY step, seq

-- name: folded_events_of_runs
-- The step events of some runs, as a snapshot folds them.
SELECT run_id, step, type, at, actor, data FROM events WHERE run_id IN ({runs}) AND step IS NOT NULL
ORDER BY run_id, seq
