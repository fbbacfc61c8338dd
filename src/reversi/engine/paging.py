"""Runs a page at a time, newest first, for listings that go on with a cursor (the HTTP API)."""

from __future__ import annotations

from dataclasses import dataclass

from reversi.core.models import RunSummary, StepStatus
from reversi.errors import BadInput
from reversi.store.base import Store

_BATCH = 200


@dataclass(frozen=True)
class RunQuery:
    """Which runs: every field that is set must match (`status`: a step in that status; `contains`:
    (where, text) pairs as `Queries.list_runs` takes them; `any_status`: a step in one of these
    statuses, or the run is one of `or_runs`; `opened_before`: a time)."""

    status: str | None = None
    actor: str | None = None
    tenant: str | None = None
    since: str | None = None
    principal: str | None = None
    contains: tuple[tuple[str, str], ...] = ()
    any_status: frozenset[str] | None = None
    or_runs: frozenset[str] = frozenset()
    opened_before: str | None = None

    def matches(self, summary: RunSummary) -> bool:
        """Whether a run (read by the store's filters already) passes the filters applied to its steps."""
        if self.principal is not None and summary.run.principal != self.principal:
            return False
        if self.status is not None and self.status not in summary.statuses:
            return False
        return self.any_status is None or bool(self.any_status & summary.statuses) \
            or summary.run.run_id in self.or_runs


@dataclass(frozen=True)
class RunPage:
    items: list[RunSummary]
    # (created_at, run_id) of the last run listed, when more may follow.
    next: tuple[str, str] | None


def list_runs_page(store: Store, query: RunQuery, *, after: tuple[str, str] | None, limit: int) -> RunPage:
    """Up to `limit` matching runs older than `after`, newest first.

    Raises:
        BadInput: `status` is not a step status, or `limit` is not 1-1000.
    """
    if query.status is not None and query.status not in {s.value for s in StepStatus}:
        raise BadInput(f"status {query.status!r} is not one of {', '.join(s.value for s in StepStatus)}")
    if not 1 <= limit <= 1000:
        raise BadInput("limit must be 1-1000")
    found: list[RunSummary] = []
    with store.read() as q:
        cursor = after
        while len(found) <= limit:
            batch = q.list_runs(actor=query.actor, tenant=query.tenant, since=query.since, before=cursor, limit=_BATCH,
                                contains=query.contains, opened_before=query.opened_before)
            for record in batch:
                if query.principal is not None and record.principal != query.principal:
                    continue
                summary = q.run_summary(record)
                if query.matches(summary):
                    found.append(summary)
            if len(batch) < _BATCH:
                break
            cursor = (batch[-1].created_at, batch[-1].run_id)
    page = found[:limit]
    more = len(found) > limit
    return RunPage(page, (page[-1].run.created_at, page[-1].run.run_id) if more and page else None)
