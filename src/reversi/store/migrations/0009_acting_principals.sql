-- Written for both SQLite and PostgreSQL.
-- Who acted, as authenticated, beside the free text an operator gives (`actor`, `by`): the
-- principal that queued a rollback job (its events carry it), and the principals that created and
-- revoked each key. NULL on the rows made before: who did those is not known.

ALTER TABLE rollback_jobs ADD COLUMN principal TEXT;
ALTER TABLE api_keys ADD COLUMN created_by TEXT;
ALTER TABLE api_keys ADD COLUMN revoked_by TEXT;
