"""The SQL of rollback jobs of many runs (`scope_jobs`): `ScopeJobQueries`, part of every transaction's
`Queries`."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from reversi.core.json_values import compact as dumps
from reversi.store.statements import Statements

_COLUMNS = ("job_id, selection, within_tenant, state, actor, principal, approve_compensations, attempts, contained, "
            "created_at, started_at, finished_at, report, error, concurrency")


@dataclass(frozen=True)
class ScopeJobRow:
    job_id: str
    selection: dict[str, Any]
    within: str | None
    state: str
    actor: str
    principal: str
    approve_compensations: bool
    attempts: int
    contained: list[str] = field(default_factory=list)
    created_at: str = ""
    started_at: str | None = None
    finished_at: str | None = None
    report: Any = None
    error: Any = None
    concurrency: int = 1  # how many independent steps of each run it undoes at once


def _row(r: Any) -> ScopeJobRow:
    return ScopeJobRow(r[0], json.loads(r[1]), r[2], r[3], r[4], r[5], bool(r[6]), int(r[7]), json.loads(r[8]), r[9],
                       r[10], r[11], json.loads(r[12]) if r[12] is not None else None,
                       json.loads(r[13]) if r[13] is not None else None, int(r[14]))


class ScopeJobQueries(Statements):
    """The SQL of rollback jobs of many runs (`scope_jobs`)."""

    def insert_scope_job(self, row: ScopeJobRow) -> None:
        self._exec(f"INSERT INTO scope_jobs ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                   (row.job_id, dumps(row.selection), row.within, row.state, row.actor, row.principal,
                    int(row.approve_compensations), row.attempts, dumps(row.contained), row.created_at, None, None,
                    None, None, row.concurrency))

    def get_scope_job(self, job_id: str) -> ScopeJobRow | None:
        row = self._exec(f"SELECT {_COLUMNS} FROM scope_jobs WHERE job_id = ?", (job_id,)).fetchone()
        return _row(row) if row else None

    def unfinished_scope_jobs(self) -> list[ScopeJobRow]:
        """Jobs queued or left running, oldest first."""
        return [_row(r) for r in self._exec(
            f"SELECT {_COLUMNS} FROM scope_jobs WHERE state <> 'done' ORDER BY created_at, job_id").fetchall()]

    def start_scope_job(self, job_id: str, at: str) -> None:
        self._exec("UPDATE scope_jobs SET state = 'running', started_at = ? WHERE job_id = ?", (at, job_id))

    def finish_scope_job(self, job_id: str, at: str, report: Any, error: Any) -> None:
        self._exec("UPDATE scope_jobs SET state = 'done', finished_at = ?, report = ?, error = ? WHERE job_id = ?",
                   (at, None if report is None else dumps(report), None if error is None else dumps(error), job_id))

    def requeue_scope_job(self, job_id: str) -> None:
        self._exec("UPDATE scope_jobs SET state = 'queued' WHERE job_id = ? AND state <> 'done'", (job_id,))
