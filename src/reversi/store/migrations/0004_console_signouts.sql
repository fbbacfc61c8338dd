-- Written for both SQLite and PostgreSQL.
-- Console sessions signed out before their cookie expires. The session cookie is signed and holds
-- no state on the server, so a sign-out is remembered here until the cookie would have expired.

CREATE TABLE console_signouts (
    session_hash TEXT PRIMARY KEY,
    until        TEXT NOT NULL
);
