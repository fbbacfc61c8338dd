"""The queries of rollback jobs of many runs (`scope_jobs`): `ScopeJobQueries`, part of every transaction's
`Queries`; their SQL is in `scope_jobs.sql`."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from reversi.core.json_values import JSONObject, JSONObjectView
from reversi.core.json_values import compact as dumps
from reversi.store.sql import load
from reversi.store.statements import Statements

_SQL = load("scope_jobs.sql")


@dataclass(frozen=True)
class ScopeJobRow:
    job_id: str
    selection: JSONObject  # `Selection.to_dict()`
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
    report: JSONObject | None = None
    error: JSONObject | None = None
    concurrency: int = 1  # how many independent steps of each run it undoes at once


def _row(r: Any) -> ScopeJobRow:
    return ScopeJobRow(r[0], json.loads(r[1]), r[2], r[3], r[4], r[5], bool(r[6]), int(r[7]), json.loads(r[8]), r[9],
                       r[10], r[11], json.loads(r[12]) if r[12] is not None else None,
                       json.loads(r[13]) if r[13] is not None else None, int(r[14]))


class ScopeJobQueries(Statements):
    """The queries of rollback jobs of many runs (`scope_jobs`)."""

    def insert_scope_job(self, row: ScopeJobRow) -> None:
        self._exec(_SQL["insert_scope_job"],
                   (row.job_id, dumps(row.selection), row.within, row.state, row.actor, row.principal,
                    int(row.approve_compensations), row.attempts, dumps(row.contained), row.created_at, None, None,
                    None, None, row.concurrency))

    def get_scope_job(self, job_id: str) -> ScopeJobRow | None:
        row = self._exec(_SQL["get_scope_job"], (job_id,)).fetchone()
        return _row(row) if row else None

    def unfinished_scope_jobs(self) -> list[ScopeJobRow]:
        """Jobs queued or left running, oldest first."""
        return [_row(r) for r in self._exec(_SQL["unfinished_scope_jobs"]).fetchall()]

    def start_scope_job(self, job_id: str, at: str) -> None:
        self._exec(_SQL["start_scope_job"], (at, job_id))

    def finish_scope_job(self, job_id: str, at: str, report: JSONObjectView | None,
                         error: JSONObjectView | None) -> None:
        self._exec(_SQL["finish_scope_job"],
                   (at, None if report is None else dumps(report), None if error is None else dumps(error), job_id))

    def requeue_scope_job(self, job_id: str) -> None:
        self._exec(_SQL["requeue_scope_job"], (job_id,))
