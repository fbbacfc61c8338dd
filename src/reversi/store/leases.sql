-- Written for both SQLite and PostgreSQL.
-- Rollback leases: who holds each run's rollback, under which fencing token, until when on the
-- store's clock ({now}: the back end's `Dialect.now_s`) (`leases.py`).

-- name: lease
SELECT token, holder, until, {now} FROM rollback_leases WHERE run_id = ?

-- name: first_lease
-- The first claim of a run: no row if another claim was first.
INSERT INTO rollback_leases (run_id, token, holder, until) VALUES (?, ?, ?, {now} + ?)
ON CONFLICT (run_id) DO NOTHING RETURNING token

-- name: take_lease
-- A claim of a run claimed before: no row unless the token is still the one read.
UPDATE rollback_leases SET token = ?, holder = ?, until = {now} + ? WHERE run_id = ? AND token = ? RETURNING token

-- name: renew_lease
UPDATE rollback_leases SET until = {now} + ? WHERE run_id = ? AND token = ? AND until IS NOT NULL RETURNING token

-- name: release_lease
UPDATE rollback_leases SET until = NULL WHERE run_id = ? AND token = ?

-- name: check_lease
-- The run's token, read locked where writers lock rows (see `LeaseQueries.check_lease`).
{run_guard} SELECT token, until FROM rollback_leases WHERE run_id = ? {run_guarded} {for_update}
