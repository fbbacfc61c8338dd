-- Written for both SQLite and PostgreSQL.
-- Encryption at rest: each run's values are sealed under a data key of its own, kept here wrapped by a
-- key-encryption key (`kek_id`) the operator holds. Erasing a run's values sets `wrapped` to NULL.

CREATE TABLE data_keys (
    data_key_id TEXT PRIMARY KEY,
    run_id      TEXT NOT NULL,
    kek_id      TEXT NOT NULL,
    wrapped     TEXT,
    created_at  TEXT NOT NULL,
    erased_at   TEXT
);

CREATE INDEX data_keys_run ON data_keys (run_id);
CREATE INDEX data_keys_kek ON data_keys (kek_id) WHERE wrapped IS NOT NULL;
