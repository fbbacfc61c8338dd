-- Written for both SQLite and PostgreSQL.
-- Drills: a write tool called on a scratch server, undone through the engine, and the world read
-- back before and after. Each row is the evidence of one drill, kept whole as JSON; the columns
-- are what `reversi manifest coverage` looks drills up by.

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
