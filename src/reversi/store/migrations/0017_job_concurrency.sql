-- Written for both SQLite and PostgreSQL.
-- Rollback jobs that undo several independent steps at once: how many at most (`concurrency`), and the
-- steps being undone right now (`current_steps`, a JSON list, newest first; NULL when none is).
ALTER TABLE rollback_jobs ADD COLUMN concurrency INTEGER NOT NULL DEFAULT 1;
ALTER TABLE rollback_jobs ADD COLUMN current_steps TEXT;
