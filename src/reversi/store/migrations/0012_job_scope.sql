-- Written for both SQLite and PostgreSQL.
-- A rollback job of part of a run (the steps after a checkpoint): the scope it was queued with, as
-- JSON `{"after_step": N, "checkpoint": NAME or null}`; NULL for the whole run (every job before this).

ALTER TABLE rollback_jobs ADD COLUMN scope TEXT
