"""The SQL of retention (`reversi prune`): the runs opened before a cutoff, what keeps each, and the
deletion of a run with everything of it: `RetentionQueries`, part of every transaction's `Queries`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from reversi.store.statements import CHUNK, Statements

# Every table with rows of a run, children before `runs` (their foreign keys point at it). A table
# keyed by run added later belongs here too.
RUN_TABLES = ("events", "steps", "step_resources", "approvals", "rollback_jobs", "rollback_leases", "data_keys", "runs")


@dataclass(frozen=True)
class RunMarks:
    """What retention reads about a run beside its snapshot."""

    last_seq: int | None = None
    last_event_at: str | None = None
    approval_pending: bool = False
    rollback_job: bool = False
    rollback_lease: bool = False


def _marks(ids: Sequence[str]) -> str:
    return ", ".join("?" for _ in ids)


class RetentionQueries(Statements):
    """Reads for retention's decision, a few statements per `CHUNK` runs, and the deletion of a run."""

    def run_marks(self, run_ids: Sequence[str]) -> dict[str, RunMarks]:
        """Each run's last event, and whether an approval is pending, a rollback job is queued or
        running, a rollback lease is held within its time (on the store's clock)."""
        found: dict[str, dict[str, Any]] = {run_id: {} for run_id in run_ids}
        for start in range(0, len(run_ids), CHUNK):
            ids = list(run_ids[start : start + CHUNK])
            marks = _marks(ids)
            for run_id, seq, at in self._exec(
                    f"SELECT run_id, MAX(seq), MAX(at) FROM events WHERE run_id IN ({marks}) GROUP BY run_id",
                    ids).fetchall():
                found[run_id].update(last_seq=int(seq), last_event_at=at)
            decided = ("SELECT 1 FROM events e WHERE e.approval_id = a.approval_id "
                       "AND e.type IN ('approval_granted', 'approval_denied')")
            for (run_id,) in self._exec(
                    f"SELECT DISTINCT a.run_id FROM approvals a WHERE a.run_id IN ({marks}) AND NOT EXISTS ({decided})",
                    ids).fetchall():
                found[run_id]["approval_pending"] = True
            for (run_id,) in self._exec(
                    f"SELECT DISTINCT run_id FROM rollback_jobs WHERE run_id IN ({marks}) AND state <> 'done'",
                    ids).fetchall():
                found[run_id]["rollback_job"] = True
            for (run_id,) in self._exec(
                    f"SELECT run_id FROM rollback_leases WHERE run_id IN ({marks}) AND until IS NOT NULL "
                    f"AND until >= {self._dialect.now_s}", ids).fetchall():
                found[run_id]["rollback_lease"] = True
        return {run_id: RunMarks(**values) for run_id, values in found.items()}

    def delete_run(self, run_id: str) -> None:
        """Delete the run and every row of it (call under the run's write lock)."""
        for table in RUN_TABLES:
            self._exec(f"DELETE FROM {table} WHERE run_id = ?", (run_id,))
