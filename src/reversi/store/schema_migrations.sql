-- Written for both SQLite and PostgreSQL.
-- The migration runner's record of the versions a store holds (`schema.migrate`). Not `schema.sql`,
-- which is the fresh store's script.

-- name: create_migrations
CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY)

-- name: done_migrations
SELECT version FROM schema_migrations

-- name: record_migration
INSERT INTO schema_migrations (version) VALUES (?)
