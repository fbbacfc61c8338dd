-- Written for both SQLite and PostgreSQL.
-- Approvals, and the events that decide them (`approvals.py`).

-- name: approval_columns
-- What an `ApprovalRow` is read from, in its order.
approval_id, run_id, step, kind, tool, args, call_key, requested_by, requested_at

-- name: insert_approval
INSERT INTO approvals ({approval_columns}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)

-- name: get_approval
SELECT {approval_columns} FROM approvals WHERE approval_id = ? ORDER BY requested_at, approval_id

-- name: approvals_for_call
SELECT {approval_columns} FROM approvals WHERE run_id = ? AND kind = ? AND call_key = ?
ORDER BY requested_at, approval_id

-- name: approval_events
-- The events of some approvals ({approvals}: their ids), each approval's in order.
SELECT approval_id, type, at, actor, data FROM events WHERE approval_id IN ({approvals}) ORDER BY run_id, seq

-- name: list_approvals
-- Approvals pending first, then oldest first. Each slot holds its filter when it is asked for: of a
-- run and of its tenant inside, of a status and after the last approval of the previous page outside.
SELECT {approval_columns} FROM (
    SELECT x.*, CASE WHEN x.decision IS NULL THEN 0 ELSE 1 END AS decided FROM (
        SELECT a.approval_id, a.run_id, a.step, a.kind, a.tool, a.args, a.call_key, a.requested_by,
               a.requested_at,
               (SELECT e.type FROM events e WHERE e.approval_id = a.approval_id
                AND e.type IN ('approval_granted', 'approval_denied') ORDER BY e.seq DESC LIMIT 1) AS decision
        FROM approvals a JOIN runs r ON r.run_id = a.run_id
        WHERE 1 = 1 {of_run} {of_tenant}
    ) x
) y
WHERE 1 = 1 {of_status} {after}
ORDER BY y.decided, y.requested_at, y.approval_id {limit}

-- name: approvals_of_run
AND a.run_id = ?

-- name: approvals_of_tenant
AND r.tenant = ?

-- name: approvals_pending
AND y.decision IS NULL

-- name: approvals_decided
-- Those decided one way: the type of the deciding event.
AND y.decision = ?

-- name: approvals_after
-- After (decided, decided, requested_at, requested_at, approval_id) of the last one of the previous page.
AND (y.decided > ? OR (y.decided = ? AND (y.requested_at > ? OR (y.requested_at = ? AND y.approval_id > ?))))
