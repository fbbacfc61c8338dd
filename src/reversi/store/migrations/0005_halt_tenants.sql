-- Written for both SQLite and PostgreSQL.
-- The tenant a halt is scoped to, in a column of its own so that a tenant's admin lists its halts
-- in SQL: '' for a halt of every tenant. NULL on the halts added before this column, whose tenant
-- is in `data` only (and on `halt_lifted`, which has none).

ALTER TABLE system_events ADD COLUMN tenant TEXT;
