-- Written for both SQLite and PostgreSQL.
-- Who holds each run's rollback. A holder claims the run with the next fencing token and renews its
-- lease while it works; every journal write of its rollback checks, in the same transaction, that the
-- token is still the run's, so a holder that was taken over (its lease ran out while it was stopped)
-- cannot journal anything more. `until` is seconds since the epoch on the store's clock, NULL once the
-- holder released the run. The process-tied lock of each token (an advisory lock, a lock file) says
-- whether its holder is still alive.

CREATE TABLE rollback_leases (
    run_id  TEXT PRIMARY KEY,
    token   BIGINT NOT NULL,
    holder  TEXT NOT NULL,
    until   DOUBLE PRECISION
);
