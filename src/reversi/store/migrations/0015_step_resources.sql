-- Written for both SQLite and PostgreSQL.
-- The resources each write touched (`reversi.core.resources`), as keyed hashes bound to the tenant:
-- one row per step and resource, with the time its outcome was journaled (the journal order across
-- runs). A step that touched a resource after another step depends on it, in any run of the tenant.

CREATE TABLE step_resources (
    resource TEXT NOT NULL,
    run_id   TEXT NOT NULL,
    step     INTEGER NOT NULL,
    at       TEXT NOT NULL,
    PRIMARY KEY (resource, run_id, step)
);

CREATE INDEX step_resources_run ON step_resources (run_id, step)
