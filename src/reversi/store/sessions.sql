-- Written for both SQLite and PostgreSQL.
-- Console sessions signed out before their cookie expires (`sessions.py`).

-- name: is_signed_out
SELECT 1 FROM console_signouts WHERE session_hash = ?

-- name: forget_signouts
-- The sign-outs whose cookies have expired by now.
DELETE FROM console_signouts WHERE until < ?

-- name: sign_out
INSERT INTO console_signouts (session_hash, until) VALUES (?, ?)
ON CONFLICT (session_hash) DO UPDATE SET until = excluded.until
