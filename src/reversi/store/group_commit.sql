-- Written for both SQLite and PostgreSQL.
-- Each write of a shared batch in a savepoint of its own (`group_commit.py`).

-- name: savepoint
SAVEPOINT reversi_write

-- name: rollback_to_savepoint
ROLLBACK TO SAVEPOINT reversi_write

-- name: release_savepoint
RELEASE SAVEPOINT reversi_write
