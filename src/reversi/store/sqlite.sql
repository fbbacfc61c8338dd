-- Written for SQLite only.
-- The embedded back end's own statements (`sqlite.py`).

-- name: now_s
-- The store's clock, in seconds since the epoch (`Dialect.now_s`).
((julianday('now') - 2440587.5) * 86400.0)

-- name: busy_timeout
-- How long a connection waits for the file's write lock, {ms}.
PRAGMA busy_timeout = {ms}

-- name: journal_mode
PRAGMA journal_mode = WAL

-- name: synchronous
PRAGMA synchronous = FULL

-- name: begin_read
BEGIN

-- name: begin_write
-- A write, and the migration lock: it holds off every other writer of the file.
BEGIN IMMEDIATE

-- name: commit
COMMIT
