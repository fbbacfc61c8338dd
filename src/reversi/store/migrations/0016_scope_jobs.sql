-- Written for both SQLite and PostgreSQL.
-- Rollback jobs of many runs (`reversi.engine.scope_jobs`): queued, running under a lease named after
-- the job, then done. `selection` is the scope's JSON; `within` the tenant an operator confined to one
-- asked from (NULL: any); `contained` what was stopped before it was queued (JSON lines).

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
    error                 TEXT
);

CREATE INDEX scope_jobs_state ON scope_jobs (state, created_at)
