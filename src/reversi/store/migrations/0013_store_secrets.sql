-- Written for both SQLite and PostgreSQL.
-- Secrets the store keeps for itself, made on first use: the key of the masks that show sensitive
-- values (`masking`), so that one value masks the same way in every process on this store.

CREATE TABLE store_secrets (
    name       TEXT PRIMARY KEY,
    value      TEXT NOT NULL,
    created_at TEXT NOT NULL
);
