"""The queries of rollback jobs (`rollback_jobs`): `JobQueries`, part of every transaction's `Queries`; their
SQL is in `jobs.sql`."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from reversi.core.json_values import JSONObject, JSONObjectView, LooseJSON
from reversi.core.json_values import compact as dumps
from reversi.core.report import ReportJSON
from reversi.store.sql import load
from reversi.store.statements import Statements

_SQL = load("jobs.sql")


@dataclass(frozen=True)
class JobRow:
    job_id: str
    run_id: str
    state: str
    actor: str
    approve_compensations: bool
    attempts: int
    created_at: str
    started_at: str | None = None
    finished_at: str | None = None
    starts: int = 0
    current_step: int | None = None
    report: LooseJSON = None  # a `ReportJSON`: the report so far while the job runs
    error: LooseJSON = None  # `ReversiError.to_dict()`
    principal: str | None = None  # who queued it, as authenticated (None: queued before 0009)
    scope: JSONObject | None = None  # the part of the run it rolls back (`RollbackScope.to_dict()`); None: all of it
    concurrency: int = 1  # how many independent steps it undoes at once
    current_steps: tuple[int, ...] = ()  # the steps being undone now, newest first


def _row(r: Any) -> JobRow:
    return JobRow(
        r[0], r[1], r[2], r[3], bool(r[4]), int(r[5]), r[6], r[7], r[8], int(r[9]), r[10],
        json.loads(r[11]) if r[11] is not None else None,
        json.loads(r[12]) if r[12] is not None else None,
        r[13],
        json.loads(r[14]) if r[14] is not None else None,
        int(r[15]),
        # (a job started before 0017, or not yet past its first step, has its current step alone)
        tuple(json.loads(r[16])) if r[16] is not None else ((r[10],) if r[10] is not None else ()),
    )


def _text(value: LooseJSON) -> str | None:
    return None if value is None else dumps(value)


def _steps(steps: tuple[int, ...]) -> str | None:
    return dumps(list(steps)) if steps else None


class JobQueries(Statements):
    """The queries of rollback jobs (`rollback_jobs`)."""

    def insert_job(self, row: JobRow) -> None:
        self._exec(
            _SQL["insert_job"],
            (row.job_id, row.run_id, row.state, row.actor, int(row.approve_compensations), row.attempts, row.created_at,
             row.started_at, row.finished_at, row.starts, row.current_step, _text(row.report), _text(row.error),
             row.principal, _text(row.scope), row.concurrency, _steps(row.current_steps)),
        )

    def get_job(self, job_id: str) -> JobRow | None:
        row = self._exec(_SQL["get_job"], (job_id,)).fetchone()
        return _row(row) if row else None

    def latest_job(self, run_id: str) -> JobRow | None:
        row = self._exec(_SQL["latest_job"], (run_id,)).fetchone()
        return _row(row) if row else None

    def unfinished_jobs(self) -> list[JobRow]:
        """Jobs queued or left running, oldest first."""
        rows = self._exec(_SQL["unfinished_jobs"]).fetchall()
        return [_row(r) for r in rows]

    def start_job(self, job_id: str, at: str, current_step: int | None) -> None:
        self._exec(_SQL["start_job"], (at, current_step, job_id))

    def record_progress(self, job_id: str, current_steps: tuple[int, ...], report: ReportJSON | None) -> None:
        """The steps being undone now (newest first; the first is `current_step`), and the report so far."""
        self._exec(
            _SQL["record_progress"],
            (current_steps[0] if current_steps else None, _steps(current_steps), _text(report), job_id),
        )

    def finish_job(self, job_id: str, at: str, report: ReportJSON | None, error: JSONObjectView | None) -> None:
        self._exec(_SQL["finish_job"], (at, _text(report), _text(error), job_id))

    def requeue_job(self, job_id: str) -> None:
        self._exec(_SQL["requeue_job"], (job_id,))
