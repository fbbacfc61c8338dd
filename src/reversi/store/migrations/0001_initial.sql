-- Written for both SQLite and PostgreSQL.
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

CREATE TABLE approvals (
    approval_id  TEXT PRIMARY KEY,
    run_id       TEXT NOT NULL REFERENCES runs (run_id),
    step         INTEGER,
    kind         TEXT NOT NULL,
    tool         TEXT NOT NULL,
    args         TEXT NOT NULL,
    call_digest  TEXT NOT NULL,
    requested_by TEXT NOT NULL,
    requested_at TEXT NOT NULL
);

CREATE INDEX approvals_call ON approvals (run_id, kind, call_digest);

-- Halts belong to no run: their journal is a stream of its own.
CREATE TABLE system_events (
    seq     BIGINT PRIMARY KEY,
    type    TEXT NOT NULL,
    at      TEXT NOT NULL,
    actor   TEXT NOT NULL,
    halt_id TEXT,
    data    TEXT NOT NULL
);

CREATE INDEX system_events_halt ON system_events (halt_id);
