-- Written for PostgreSQL only.
-- The shared back end's own statements (`postgres.py`): sessions, locks, transactions.

-- name: now_s
-- The store's clock, in seconds since the epoch (`Dialect.now_s`).
EXTRACT(EPOCH FROM clock_timestamp())::float8

-- name: idle_timeout
-- A transaction left idle this long ({ms}) is ended by the server, with its locks.
SET idle_in_transaction_session_timeout = {ms}

-- name: current_schema
SELECT current_schema()

-- name: lock_run
SELECT 1 FROM runs WHERE run_id = ? FOR UPDATE

-- name: lock_key
-- An advisory lock held until the transaction ends (`lock_name`, and the migration lock).
SELECT pg_advisory_xact_lock(?)

-- name: try_process_lock
-- A session advisory lock: a rollback lease's process lock.
SELECT pg_try_advisory_lock(?)

-- name: process_unlock
SELECT pg_advisory_unlock(?)

-- name: begin
BEGIN

-- name: begin_holding_halts
-- A write that holds the halts' advisory lock shared from its start, taken in the BEGIN's round trip.
-- Two statements go without parameters, so {key} is our own lock key, put in when the store opens.
BEGIN; SELECT pg_advisory_xact_lock_shared({key})

-- name: commit
COMMIT

-- name: rollback
ROLLBACK
