-- Written for both SQLite and PostgreSQL.
-- The resources steps touched, as keyed hashes (`resources.py`).

-- name: add_touches
-- {rows}: a `touch_row` for each resource touched.
INSERT INTO step_resources (resource, run_id, step, at) VALUES {rows}
ON CONFLICT (resource, run_id, step) DO NOTHING

-- name: touch_row
(?, ?, ?, ?)

-- name: run_touches
SELECT resource, run_id, step, at FROM step_resources WHERE run_id IN ({runs})

-- name: touches_of
SELECT resource, run_id, step, at FROM step_resources WHERE resource IN ({resources})
