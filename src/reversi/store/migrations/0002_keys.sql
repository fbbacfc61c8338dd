-- Written for both SQLite and PostgreSQL.
-- API keys: who a request over HTTP acts as. Only a hash of each secret is kept.

CREATE TABLE api_keys (
    key_id     TEXT PRIMARY KEY,
    name       TEXT NOT NULL,
    role       TEXT NOT NULL,
    tenant     TEXT,
    secret_sha256 TEXT NOT NULL,
    created_at TEXT NOT NULL,
    revoked_at TEXT
);
