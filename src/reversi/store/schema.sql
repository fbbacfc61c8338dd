-- Written for both SQLite and PostgreSQL.
-- The schema as of migration 0018: what a fresh store is made with, in one go. It is every migration
-- up to that one, applied in order (tests/store/test_schema.py checks that both give the same schema);
-- a later migration is applied after it until this file is brought up to date with it.
-- JSON is stored as text; times are ISO 8601 text, except a lease's `until` (seconds, the store's clock).

-- The ledger: runs, the immutable facts of each step, and the append-only journal of events.
CREATE TABLE runs (
    run_id      TEXT PRIMARY KEY,
    principal   TEXT NOT NULL,
    mode        TEXT NOT NULL,
    actor       TEXT NOT NULL,
    tenant      TEXT NOT NULL,
    environment TEXT NOT NULL,
    labels      TEXT NOT NULL,
    created_at  TEXT NOT NULL
);

CREATE INDEX runs_created_at ON runs (created_at);

CREATE TABLE steps (
    run_id                      TEXT NOT NULL REFERENCES runs (run_id),
    step                        INTEGER NOT NULL,
    tool                        TEXT NOT NULL,
    args                        TEXT NOT NULL,
    depends_on                  TEXT NOT NULL,
    compensation_needs_approval INTEGER NOT NULL,
    manifest_digest             TEXT,
    dup_key                     TEXT,
    PRIMARY KEY (run_id, step)
);

CREATE INDEX steps_dup_key ON steps (dup_key) WHERE dup_key IS NOT NULL;

CREATE TABLE events (
    run_id      TEXT NOT NULL REFERENCES runs (run_id),
    seq         BIGINT NOT NULL,
    step        INTEGER,
    type        TEXT NOT NULL,
    at          TEXT NOT NULL,
    actor       TEXT NOT NULL,
    data        TEXT NOT NULL,
    approval_id TEXT,
    PRIMARY KEY (run_id, seq)
);

CREATE INDEX events_step ON events (run_id, step, seq);
CREATE INDEX events_approval ON events (approval_id) WHERE approval_id IS NOT NULL;
CREATE INDEX events_at ON events (at);

-- `call_key`: the digest of the tool and its arguments for a forward call, the step's number for a
-- compensation.
CREATE TABLE approvals (
    approval_id  TEXT PRIMARY KEY,
    run_id       TEXT NOT NULL REFERENCES runs (run_id),
    step         INTEGER,
    kind         TEXT NOT NULL,
    tool         TEXT NOT NULL,
    args         TEXT NOT NULL,
    call_key     TEXT NOT NULL,
    requested_by TEXT NOT NULL,
    requested_at TEXT NOT NULL
);

CREATE INDEX approvals_call ON approvals (run_id, kind, call_key);

-- Halts belong to no run: their journal is a stream of its own. `tenant`: '' for a halt of every
-- tenant, NULL on the halts journaled before it had a column (and on `halt_lifted`).
CREATE TABLE system_events (
    seq     BIGINT PRIMARY KEY,
    type    TEXT NOT NULL,
    at      TEXT NOT NULL,
    actor   TEXT NOT NULL,
    halt_id TEXT,
    data    TEXT NOT NULL,
    tenant  TEXT
);

CREATE INDEX system_events_halt ON system_events (halt_id);

-- API keys: who a request over HTTP acts as. Only a hash of each secret is kept.
CREATE TABLE api_keys (
    key_id        TEXT PRIMARY KEY,
    name          TEXT NOT NULL,
    role          TEXT NOT NULL,
    tenant        TEXT,
    secret_sha256 TEXT NOT NULL,
    created_at    TEXT NOT NULL,
    revoked_at    TEXT,
    created_by    TEXT,
    revoked_by    TEXT
);

-- Rollback jobs started over HTTP (see 0003_rollback_jobs.sql); `scope` NULL for the whole run.
CREATE TABLE rollback_jobs (
    job_id                TEXT PRIMARY KEY,
    run_id                TEXT NOT NULL REFERENCES runs (run_id),
    state                 TEXT NOT NULL,
    actor                 TEXT NOT NULL,
    approve_compensations INTEGER NOT NULL,
    attempts              INTEGER NOT NULL,
    created_at            TEXT NOT NULL,
    started_at            TEXT,
    finished_at           TEXT,
    starts                INTEGER NOT NULL,
    current_step          INTEGER,
    report                TEXT,
    error                 TEXT,
    principal             TEXT,
    scope                 TEXT,
    concurrency           INTEGER NOT NULL DEFAULT 1,
    current_steps         TEXT
);

CREATE INDEX rollback_jobs_run ON rollback_jobs (run_id, created_at);
CREATE INDEX rollback_jobs_state ON rollback_jobs (state, created_at);

-- Console sessions signed out before their cookie expires.
CREATE TABLE console_signouts (
    session_hash TEXT PRIMARY KEY,
    until        TEXT NOT NULL
);

-- Who holds each run's rollback (see 0007_rollback_leases.sql).
CREATE TABLE rollback_leases (
    run_id  TEXT PRIMARY KEY,
    token   BIGINT NOT NULL,
    holder  TEXT NOT NULL,
    until   DOUBLE PRECISION
);

-- Drills: the evidence of each, kept whole as JSON.
CREATE TABLE drills (
    drill_id       TEXT PRIMARY KEY,
    tool           TEXT NOT NULL,
    server_name    TEXT NOT NULL,
    server_version TEXT NOT NULL,
    verdict        TEXT NOT NULL,
    at             TEXT NOT NULL,
    evidence       TEXT NOT NULL
);

CREATE INDEX drills_by_tool ON drills (tool, at);

-- Secrets the store keeps for itself (`reversi.store.schema.MADE_SECRETS`).
CREATE TABLE store_secrets (
    name       TEXT PRIMARY KEY,
    value      TEXT NOT NULL,
    created_at TEXT NOT NULL
);

-- Each run's data keys, wrapped by a key-encryption key; `wrapped` NULL once erased.
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

-- The resources each write touched, as keyed hashes bound to the tenant.
CREATE TABLE step_resources (
    resource TEXT NOT NULL,
    run_id   TEXT NOT NULL,
    step     INTEGER NOT NULL,
    at       TEXT NOT NULL,
    PRIMARY KEY (resource, run_id, step)
);

CREATE INDEX step_resources_run ON step_resources (run_id, step);

-- Rollback jobs of many runs (see 0016_scope_jobs.sql).
CREATE TABLE scope_jobs (
    job_id                TEXT PRIMARY KEY,
    selection             TEXT NOT NULL,
    within_tenant         TEXT,
    state                 TEXT NOT NULL,
    actor                 TEXT NOT NULL,
    principal             TEXT NOT NULL,
    approve_compensations INTEGER NOT NULL,
    attempts              INTEGER NOT NULL,
    contained             TEXT NOT NULL,
    created_at            TEXT NOT NULL,
    started_at            TEXT,
    finished_at           TEXT,
    report                TEXT,
    error                 TEXT,
    concurrency           INTEGER NOT NULL DEFAULT 1
);

CREATE INDEX scope_jobs_state ON scope_jobs (state, created_at);
