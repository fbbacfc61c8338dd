-- Written for both SQLite and PostgreSQL.
-- Drills, each one's evidence kept whole (`drills.py`).

-- name: columns
-- What a `Drill` is read from, in its order.
drill_id, tool, server_name, server_version, verdict, at, evidence

-- name: insert_drill
INSERT INTO drills ({columns}) VALUES (?, ?, ?, ?, ?, ?, ?)

-- name: drills
-- Drills newest first; each slot holds its filter when it is asked for.
SELECT {columns} FROM drills WHERE 1 = 1 {of_tool} {of_server} ORDER BY at DESC, drill_id {limit}

-- name: drills_of_tool
AND tool = ?

-- name: drills_of_server
AND server_name = ?
