-- Written for both SQLite and PostgreSQL.
-- What every query class stands on (`statements.py`). The row-lock parts are put into a statement
-- only where the back end's writers lock rows (`Dialect.row_locks`: PostgreSQL); SQLite's writers
-- are serialised by BEGIN IMMEDIATE already, and its statements leave them out.

-- name: run_guard
-- A run's row lock taken within a query that reads something else, saving a round trip on the
-- journal's hot path: the slot {run_guard} at the head of a statement.
WITH locked AS (SELECT run_id FROM runs WHERE run_id = ? FOR UPDATE)

-- name: run_guarded
-- The guarded statement's filter, at its slot {run_guarded}: it reads the lock's row count once,
-- so PostgreSQL takes the lock before it reads anything else.
AND (SELECT count(*) FROM locked) >= 0

-- name: for_update
-- The slot {for_update}: the rows a statement reads are locked, and read as last committed.
FOR UPDATE

-- name: limit
-- The slot {limit} of a listing asked for at most so many rows.
LIMIT ?
