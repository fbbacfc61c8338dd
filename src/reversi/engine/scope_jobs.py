"""Rollback jobs of many runs: a rollback of a `Selection` asked for over HTTP, run later by a worker.

A job is `queued`, then `running` while a worker holds the job's own lease (named `scope:JOB`), then
`done` with the report (or the error that stopped it). Its rollback is `incidents.rollback_scope`:
each run under that run's lease, so a worker that dies or stalls leaves nothing a takeover cannot
finish, and nothing is undone twice. A job left `running` by a dead worker is taken up again by the
next worker that claims its lease; the journal, not the job, says what is undone already.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from reversi.core import redaction
from reversi.core.backoff import Retry
from reversi.core.json_values import JSONObject
from reversi.core.models import utc_now
from reversi.core.scopes import ScopeReport, Selection
from reversi.engine import incidents
from reversi.engine.rollback import Compensate, ReadBack, check_concurrency
from reversi.errors import Fenced, NotFound, ReversiError, StoreUnavailable
from reversi.store.leases import DEFAULT_LEASE_S, Lease
from reversi.store.queries import Queries
from reversi.store.scope_jobs import ScopeJobRow

if TYPE_CHECKING:
    from reversi.engine.ledger import Ledger

T = TypeVar("T")

__all__ = ["ScopeJob", "ScopeJobRunner", "get_scope_job", "submit_scope_rollback", "unfinished_scope_jobs"]


def lease_name(job_id: str) -> str:
    return f"scope:{job_id}"


@dataclass(frozen=True)
class ScopeJob:
    """A rollback job of many runs as the API shows it."""

    row: ScopeJobRow

    @property
    def job_id(self) -> str:
        return self.row.job_id

    def to_dict(self) -> JSONObject:
        r = self.row
        return {"job_id": r.job_id, "scope": r.selection, "state": r.state, "report": r.report, "error": r.error,
                "contained": list(r.contained), "actor": r.actor, "principal": r.principal,
                "concurrency": r.concurrency, "created_at": r.created_at, "started_at": r.started_at,
                "finished_at": r.finished_at}


def submit_scope_rollback(ledger: Ledger, selection: Selection, *, actor: str, principal: str, within: str | None,
                          approve_compensations: bool, attempts: int, contained: list[str],
                          concurrency: int = 1) -> ScopeJob:
    """Queue a rollback of `selection` (of tenant `within` only, when given), undoing up to `concurrency`
    independent steps of each run at once."""
    Retry(attempts=attempts)  # validates
    check_concurrency(concurrency)
    row = ScopeJobRow(f"scopejob_{uuid.uuid4().hex}", selection.to_dict(), within, "queued", actor, principal,
                      approve_compensations, attempts, contained, utc_now(), concurrency=concurrency)
    with ledger.store.write() as q:
        q.insert_scope_job(row)
    return ScopeJob(row)


def get_scope_job(ledger: Ledger, job_id: str, within: str | None) -> ScopeJob:
    """The job `job_id` (one queued from tenant `within`, for a principal confined to it).

    Raises:
        NotFound: no such job (for this principal).
    """
    with ledger.store.read() as q:
        row = q.get_scope_job(job_id)
    if row is None or (within is not None and row.within != within):
        raise NotFound(f"no rollback job {job_id}")
    return ScopeJob(row)


def unfinished_scope_jobs(ledger: Ledger) -> list[ScopeJob]:
    with ledger.store.read() as q:
        return [ScopeJob(r) for r in q.unfinished_scope_jobs()]


@dataclass
class ScopeJobRunner:
    """Runs one rollback job of many runs under the job's lease."""

    ledger: Ledger
    compensate: Compensate
    read_back: ReadBack | None = None
    lease_s: float = DEFAULT_LEASE_S

    def claim(self, job_id: str) -> tuple[ScopeJob, Lease] | None:
        """The job and its lease, unless it is done or someone alive holds it."""
        lock = self.ledger.store.try_lock_run(lease_name(job_id), self.lease_s)
        if lock is None:
            return None
        with self.ledger.store.read() as q:
            row = q.get_scope_job(job_id)
        if row is None or row.state == "done":
            lock.release()
            return None
        return ScopeJob(row), lock

    async def run(self, job: ScopeJob, lease: Lease) -> ScopeJob:
        """Run a claimed job to its end; StoreUnavailable and cancellation leave it for a later run.

        Raises:
            Fenced: another worker took the job over.
        """
        row = job.row
        await asyncio.to_thread(_fenced_write, lease, lambda q: q.start_scope_job(row.job_id, utc_now()))
        acting = self.ledger.acting_as(row.principal)
        report: ScopeReport | None = None
        error: dict[str, str] | None = None
        try:
            report = await incidents.rollback_scope(
                acting, Selection.from_dict(row.selection), self.compensate,
                {"retry": Retry(attempts=row.attempts), "verifier": self.read_back, "actor": row.actor,
                 "approve_compensations": row.approve_compensations, "job": row.job_id,
                 "concurrency": row.concurrency},
                within=row.within, contained=row.contained, check=lease.ensure)
        except (StoreUnavailable, Fenced):
            raise
        except ReversiError as exc:
            error = exc.to_dict()
        except Exception as exc:  # a bug or a broken command: the job ends, saying what happened
            error = {"code": "error", "message": str(exc) or type(exc).__name__}
        done = None if report is None else redaction.report(acting.masker(), report.to_dict())

        def finish(q: Queries) -> ScopeJobRow:
            q.finish_scope_job(row.job_id, utc_now(), done, error)
            lease.finish(q)
            found = q.get_scope_job(row.job_id)
            assert found is not None
            return found

        return ScopeJob(await asyncio.to_thread(_fenced_write, lease, finish))

    def requeue(self, job: ScopeJob, lease: Lease) -> None:
        """Put back a job this worker stopped (a clean shutdown)."""
        _fenced_write(lease, lambda q: q.requeue_scope_job(job.job_id))


def _fenced_write(lease: Lease, fn: Callable[[Queries], T]) -> T:
    """`fn` in a write that lands only while the job's own lease (`lease_name`) still holds."""
    with lease.fenced() as q:
        return fn(q)
