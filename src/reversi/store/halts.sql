-- Written for both SQLite and PostgreSQL.
-- The halts' stream: `halt_added` and `halt_lifted` in `system_events` (`halts.py`).

-- name: last_system_seq
SELECT MAX(seq) FROM system_events

-- name: insert_system_event
INSERT INTO system_events (seq, type, at, actor, halt_id, data, tenant) VALUES (?, ?, ?, ?, ?, ?, ?)

-- name: active_halts
-- The halts added and not lifted, in order; {of_tenant} holds `halts_of_tenant` when asked for.
{run_guard} SELECT a.halt_id, a.actor, a.at, a.data, a.tenant FROM system_events a
WHERE a.type = 'halt_added' {of_tenant}
AND NOT EXISTS (SELECT 1 FROM system_events b WHERE b.type = 'halt_lifted' AND b.halt_id = a.halt_id) {run_guarded}
ORDER BY a.seq

-- name: halts_of_tenant
-- A tenant's halts, and those added before 0005 (no tenant column), which Python sorts out.
AND (a.tenant = ? OR a.tenant IS NULL)

-- name: system_events
SELECT seq, type, at, actor, halt_id, data FROM system_events {since} ORDER BY seq

-- name: system_events_since
WHERE at >= ?
