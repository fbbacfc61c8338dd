-- Written for both SQLite and PostgreSQL.
-- Rollback jobs started over HTTP: queued, then running under the run's rollback lock, then done.
-- A job left `running` by a server that died is picked up again by the next server whose worker
-- gets the run's lock: the journal, not this table, says which steps are already undone.

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
    error                 TEXT
);

CREATE INDEX rollback_jobs_run ON rollback_jobs (run_id, created_at);
CREATE INDEX rollback_jobs_state ON rollback_jobs (state, created_at);
