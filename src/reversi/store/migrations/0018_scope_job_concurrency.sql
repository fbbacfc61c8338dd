-- Written for both SQLite and PostgreSQL.
-- Rollback jobs of many runs that undo several independent steps of each run at once: how many at most.
ALTER TABLE scope_jobs ADD COLUMN concurrency INTEGER NOT NULL DEFAULT 1;
