-- Written for both SQLite and PostgreSQL.
-- API keys (`keys.py`).

-- name: columns
-- What a `KeyRow` is read from, in its order.
key_id, name, role, tenant, secret_sha256, created_at, revoked_at, created_by, revoked_by

-- name: insert_key
INSERT INTO api_keys ({columns}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)

-- name: get_key
SELECT {columns} FROM api_keys WHERE key_id = ?

-- name: list_keys
-- Every key, oldest first; {of_tenant} holds `keys_of_tenant` when asked for.
SELECT {columns} FROM api_keys {of_tenant} ORDER BY created_at, key_id

-- name: keys_of_tenant
WHERE tenant = ?

-- name: revoke_key
UPDATE api_keys SET revoked_at = ?, revoked_by = ? WHERE key_id = ? AND revoked_at IS NULL

-- name: any_key
SELECT 1 FROM api_keys LIMIT 1

-- name: keys_named
SELECT {columns} FROM api_keys WHERE name = ?

-- name: key_is_active
SELECT 1 FROM api_keys WHERE key_id = ? AND revoked_at IS NULL
