-- Written for both SQLite and PostgreSQL.
-- The store's own secrets (`secrets.py`; `schema.migrate` makes them with the schema).

-- name: read_secret
SELECT value FROM store_secrets WHERE name = ?

-- name: insert_secret
-- A secret, unless it was made already (whoever inserts first wins a race).
INSERT INTO store_secrets (name, value, created_at) VALUES (?, ?, ?) ON CONFLICT (name) DO NOTHING
