"""The SQL of retention (`reversi prune`): the runs opened before a cutoff, what keeps each, and the
deletion of a run with everything of it: `RetentionQueries`, part of every transaction's `Queries`; their
SQL is in `retention.sql`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from reversi.store.sql import fill, load, marks
from reversi.store.statements import CHUNK, Statements

# Every table with rows of a run, children before `runs` (their foreign keys point at it). A table
# keyed by run added later belongs here too.
RUN_TABLES = ("events", "steps", "step_resources", "approvals", "rollback_jobs", "rollback_leases", "data_keys", "runs")
_SQL = load("retention.sql")
_DELETES = tuple(fill(_SQL["delete_rows"], table=table) for table in RUN_TABLES)


@dataclass(frozen=True)
class RunMarks:
    """What retention reads about a run beside its snapshot."""

    last_seq: int | None = None
    last_event_at: str | None = None
    approval_pending: bool = False
    rollback_job: bool = False
    rollback_lease: bool = False


class RetentionQueries(Statements):
    """Reads for retention's decision, a few statements per `CHUNK` runs, and the deletion of a run."""

    def run_marks(self, run_ids: Sequence[str]) -> dict[str, RunMarks]:
        """Each run's last event, and whether an approval is pending, a rollback job is queued or
        running, a rollback lease is held within its time (on the store's clock)."""
        found: dict[str, dict[str, Any]] = {run_id: {} for run_id in run_ids}
        for start in range(0, len(run_ids), CHUNK):
            ids = list(run_ids[start : start + CHUNK])
            runs = marks(len(ids))
            for run_id, seq, at in self._exec(fill(_SQL["last_events"], runs=runs), ids).fetchall():
                found[run_id].update(last_seq=int(seq), last_event_at=at)
            for (run_id,) in self._exec(fill(_SQL["pending_approvals"], runs=runs), ids).fetchall():
                found[run_id]["approval_pending"] = True
            for (run_id,) in self._exec(fill(_SQL["unfinished_jobs"], runs=runs), ids).fetchall():
                found[run_id]["rollback_job"] = True
            for (run_id,) in self._exec(fill(_SQL["held_leases"], runs=runs, now=self._dialect.now_s), ids).fetchall():
                found[run_id]["rollback_lease"] = True
        return {run_id: RunMarks(**values) for run_id, values in found.items()}

    def delete_run(self, run_id: str) -> None:
        """Delete the run and every row of it (call under the run's write lock)."""
        for sql in _DELETES:
            self._exec(sql, (run_id,))
