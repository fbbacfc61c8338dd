-- Written for both SQLite and PostgreSQL.
-- The column that says which call an approval is for held a digest only for forward calls (of the
-- tool and its arguments); for a compensation it holds the step's number. It is named for what it
-- is in both cases: the key of the call.

ALTER TABLE approvals RENAME COLUMN call_digest TO call_key;
