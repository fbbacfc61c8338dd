"""Rollback jobs: a rollback asked for now and run later by a worker, whose state lives in the store.

A job is `queued`, then `running` while a worker holds the run's rollback lease, then `done` (with
the report, or the error that stopped it). The lease is tied to the worker's process, so a job left
`running` by a process that died is free at once: any worker sharing the store runs it again. A
worker stopped past its lease (paused, cut off) is taken over the same way, and its writes are refused
when it wakes (`Fenced`: every write of the job checks its fencing token). Running a job again is
safe because the executor is: compensated steps are skipped, and a step left `compensating` is
retried with the same idempotency key. The job is marked done and its lease released in one write.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import NotRequired, TypedDict

from reversi.core.backoff import Retry
from reversi.core.checkpoints import RollbackScope
from reversi.core.json_values import LooseJSONObject
from reversi.core.manifest import ManifestSet
from reversi.core.models import utc_now
from reversi.core.report import ReportJSON, RollbackReport
from reversi.engine.rollback import (
    Compensate,
    ReadBack,
    RollbackExecutor,
    RollbackOptions,
    check_concurrency,
    step_after,
)
from reversi.errors import Fenced, NotFound, ReversiError, RollbackInProgress, StoreUnavailable
from reversi.store.base import Store
from reversi.store.jobs import JobRow
from reversi.store.leases import DEFAULT_LEASE_S, Lease

__all__ = ["Job", "JobRunner", "JobState", "Lease", "latest_job", "requeue", "submit_rollback", "unfinished_jobs"]


class JobState(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"


@dataclass(frozen=True)
class Job:
    """A rollback job as the API shows it: `report` is the report so far while it runs."""

    row: JobRow

    @property
    def job_id(self) -> str:
        return self.row.job_id

    @property
    def state(self) -> JobState:
        return JobState(self.row.state)

    def to_dict(self) -> JobJSON:
        r = self.row
        out = JobJSON(
            job_id=r.job_id, run_id=r.run_id, state=r.state, current_step=r.current_step,
            current_steps=list(r.current_steps), concurrency=r.concurrency, report=r.report, error=r.error,
            actor=r.actor, principal=r.principal,
            created_at=r.created_at, started_at=r.started_at, finished_at=r.finished_at,
        )
        if r.scope is not None:
            out["scope"] = r.scope
        return out


class JobJSON(TypedDict):
    """A rollback job as JSON (`GET /v1/runs/{id}/rollback`): `report` is the report so far while it runs,
    `current_steps` the steps being undone now (newest first; `current_step` the first of them)."""

    job_id: str
    run_id: str
    state: str
    current_step: int | None
    current_steps: list[int]
    concurrency: int
    report: ReportJSON | None
    error: dict[str, str] | None
    actor: str
    principal: str | None
    created_at: str
    started_at: str | None
    finished_at: str | None
    scope: NotRequired[LooseJSONObject]


def submit_rollback(store: Store, run_id: str, *, actor: str, approve_compensations: bool, attempts: int,
                    principal: str | None = None, scope: RollbackScope | None = None, concurrency: int = 1) -> Job:
    """Queue a rollback of `run_id` (the caller has checked that the run exists and may be rolled back),
    done as `actor` (who the operator says acts) by `principal` (who they are authenticated as); of the
    steps `scope` covers only, when given (it is kept with the job, so a job run again covers the same).

    Raises:
        RollbackInProgress: a job of this run is not done yet, or another process is rolling it back.
        BadInput: `attempts` is not 1-10, or `concurrency` not 1-64.
    """
    Retry(attempts=attempts)  # validates
    check_concurrency(concurrency)
    if store.rollback_held(run_id):
        raise RollbackInProgress(run_id)
    row = JobRow(f"job_{uuid.uuid4().hex}", run_id, JobState.QUEUED.value, actor, approve_compensations, attempts,
                 utc_now(), principal=principal, scope=scope.to_dict() if scope is not None else None,
                 concurrency=concurrency)
    with store.write() as q:
        q.lock_run(run_id)
        latest = q.latest_job(run_id)
        if latest is not None and latest.state != JobState.DONE:
            raise RollbackInProgress(run_id)
        q.insert_job(row)
    return Job(row)


def latest_job(store: Store, run_id: str) -> Job:
    """The run's newest rollback job.

    Raises:
        NotFound: the run has never had one.
    """
    with store.read() as q:
        row = q.latest_job(run_id)
    if row is None:
        raise NotFound(f"no rollback job for {run_id}")
    return Job(row)


def unfinished_jobs(store: Store) -> list[Job]:
    with store.read() as q:
        return [Job(r) for r in q.unfinished_jobs()]


def requeue(store: Store, job: Job, lease: Lease) -> None:
    """Put a job this process stopped running under `lease` back in the queue (a clean shutdown).

    Raises:
        Fenced: another process took the job over meanwhile: it is left to that one.
    """
    with lease.fenced() as q:
        q.requeue_job(job.job_id)


@dataclass
class JobRunner:
    """Runs one job under the run's rollback lease, writing its progress to the store as it goes."""

    store: Store
    manifests: ManifestSet
    compensate: Compensate
    read_back: ReadBack | None = None
    on_done: Callable[[Job], None] | None = None
    lease_s: float = DEFAULT_LEASE_S
    follow_up: Callable[[LooseJSONObject], object] | None = None  # told of each follow-up a job's rollback opens

    def claim(self, job_id: str) -> tuple[Job, Lease] | None:
        """Take the run's lease for a job that is not done; None when someone alive holds it within
        theirs (or the job is done)."""
        with self.store.read() as q:
            row = q.get_job(job_id)
        if row is None or row.state == JobState.DONE:
            return None
        lock = self.store.try_lock_run(row.run_id, self.lease_s)
        if lock is None:
            return None
        with self.store.read() as q:  # it may have finished between the read and the claim
            row = q.get_job(job_id)
        if row is None or row.state == JobState.DONE:
            lock.release()
            return None
        return Job(row), lock

    async def run(self, job: Job, lease: Lease) -> Job:
        """Execute a job claimed with `lease` to the end (hold it meanwhile); returns it as it finished.

        A StoreUnavailable or a cancellation leaves the job unfinished, for a later run. The store
        is read and written off the event loop.

        Raises:
            Fenced: another worker took the job over (this one was stopped past its lease); nothing
                more was journaled here.
        """
        row = job.row
        await asyncio.to_thread(self._start, row, lease)
        executor = RollbackExecutor(
            self.store,
            self.manifests,
            RollbackOptions(
                compensate=self.compensate,
                retry=Retry(attempts=row.attempts),
                read_back=self.read_back,
                approve_compensations=row.approve_compensations,
                actor=row.actor,
                principal=row.principal,
                job=row.job_id,
                follow_up=self.follow_up,
                concurrency=row.concurrency,
                progress=lambda done, total: self._progress(row, lease, executor, done, total),
            ),
            lease=lease,
        )
        report: RollbackReport | None = None
        error: dict[str, str] | None = None
        try:
            report = await executor.execute(row.run_id, RollbackScope.from_dict(row.scope))
        except (StoreUnavailable, Fenced):
            raise
        except ReversiError as exc:
            error = exc.to_dict()
        except Exception as exc:  # a bug or a broken command: the job ends, saying what happened
            error = {"code": "error", "message": str(exc) or type(exc).__name__}
        finished = await asyncio.to_thread(self._finish, row, lease, report, error)
        if self.on_done is not None:
            self.on_done(finished)
        return finished

    def _start(self, row: JobRow, lease: Lease) -> None:
        with self.store.read() as q:
            snapshot = q.snapshot(row.run_id)
        after = _after_step(row)
        total = max(len(snapshot.steps) - 1 - after, 0) if snapshot is not None else 0
        with lease.fenced() as q:
            q.start_job(row.job_id, utc_now(), step_after(0, total, after))

    def _finish(self, row: JobRow, lease: Lease, report: RollbackReport | None, error: dict[str, str] | None) -> Job:
        with lease.fenced() as q:
            q.finish_job(row.job_id, utc_now(), report.to_dict() if report else None, error)
            lease.finish(q)  # done and released in one write: a new job may be queued at once
            done = q.get_job(row.job_id)
        assert done is not None
        return Job(done)

    async def _progress(self, row: JobRow, lease: Lease, executor: RollbackExecutor, done: int, total: int) -> None:
        """Journal where the job stands: read on the loop, between the executor's steps; written off it."""
        if row.concurrency > 1:
            current = tuple(sorted(executor.in_flight, reverse=True))
        else:
            after = step_after(done, total, _after_step(row))
            current = (after,) if after is not None else ()
        report = executor.report.to_dict() if executor.report is not None else None
        if report is not None:
            report["complete"] = False  # so far: a client polling the job must not read it as done
        await asyncio.to_thread(self._record_progress, row, lease, current, report)

    @staticmethod
    def _record_progress(row: JobRow, lease: Lease, current: tuple[int, ...], report: ReportJSON | None) -> None:
        with lease.fenced() as q:
            q.record_progress(row.job_id, current, report)


def _after_step(row: JobRow) -> int:
    """The last step the job keeps: it rolls back the steps after it (-1: the whole run)."""
    scope = RollbackScope.from_dict(row.scope)
    return scope.after_step if scope is not None else -1
