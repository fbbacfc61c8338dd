"""The ledger's queries, shared by both back ends: one `Queries` object per transaction.

The SQL is portable, with `?` placeholders, and lives in `.sql` files: each query module runs the
statements of the file beside it (`queries.sql` for this one; see `sql.py`). Each back end supplies a
cursor, the way its driver writes placeholders, and the few statements that differ (row locks,
advisory locks, its clock), through `Dialect` (`statements.py`). Every table's queries are methods of a
query class (`ApprovalQueries`, `DrillQueries`, `HaltQueries`, `JobQueries`, `KeyQueries`,
`LeaseQueries`, `ResourceQueries`, `RetentionQueries`, `ScopeJobQueries`, `SecretQueries`,
`SessionQueries`, and the runs, steps and events here); `Queries` is all of them.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any

from reversi.core.gc_pause import gc_paused
from reversi.core.json_values import LooseJSON, loads
from reversi.core.json_values import compact as dumps
from reversi.core.models import (
    NO_DATA,
    Event,
    EventType,
    Mode,
    NewEvent,
    RunRecord,
    RunSnapshot,
    RunSummary,
    Scope,
    StepRecord,
    StepStatus,
    data_read,
    derive_step_rows,
    step_record,
    utc_now,
)
from reversi.errors import NotFound
from reversi.store.approvals import ApprovalQueries
from reversi.store.data_keys import DataKeyQueries
from reversi.store.drills import DrillQueries
from reversi.store.halts import HaltQueries
from reversi.store.jobs import JobQueries
from reversi.store.keys import KeyQueries
from reversi.store.leases import LeaseQueries
from reversi.store.resources import ResourceQueries
from reversi.store.retention import RetentionQueries
from reversi.store.scope_jobs import ScopeJobQueries
from reversi.store.secrets import SecretQueries
from reversi.store.sessions import SessionQueries
from reversi.store.sql import fill, load, marks, optional
from reversi.store.statements import CHUNK, LIMIT, guarded

_SQL = load("queries.sql")
_STEP_EVENTS = guarded(_SQL["step_events"])
FoldedEvent = tuple[str, str, str, Mapping[str, LooseJSON]]  # (type, at, actor, data), as `derive_step_rows` takes it
# Where a search looks: columns of `runs`, and for `any` the tools its steps called too ("stripe.").
_SEARCHED = {"any": _SQL["runs_containing_any"], "actor": _SQL["runs_containing_actor"],
             "tenant": _SQL["runs_containing_tenant"]}


def _run(row: Any) -> RunRecord:
    return RunRecord(row[0], row[1], Mode(row[2]), Scope(row[3], row[4], row[5]), json.loads(row[6]), row[7])


def _page(key: tuple[str, str] | None) -> tuple[str | None, ...]:
    """The parameters of `runs_before` and `runs_after`: (created_at, created_at, run_id), or (None,)."""
    return (key[0], key[0], key[1]) if key is not None else (None,)


def _containing(part: str, text: str, params: list[Any]) -> str:
    """The filter of runs with `text` in `part` (`_SEARCHED`), whatever its case."""
    fragment = _SEARCHED[part]
    pattern = "%" + text.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
    params.extend([pattern] * fragment.count("?"))
    return fragment




class Queries(ApprovalQueries, DataKeyQueries, DrillQueries, HaltQueries, JobQueries, KeyQueries, LeaseQueries,
              ResourceQueries, RetentionQueries, ScopeJobQueries, SecretQueries, SessionQueries):
    """Every read and write of the ledger, inside one transaction of the back end's choosing: runs,
    steps and events here, the rest from the query class of each table."""

    def _step(self, row: Any) -> StepRecord:
        args = self.vault.load(self, row[0], "args", row[3])
        depends_on = row[4]
        return step_record(row[0], row[1], row[2], args, () if depends_on == "[]" else tuple(loads(depends_on)),
                           bool(row[5]), row[6], row[7])

    def _event(self, row: Any) -> Event:
        return Event(row[0], row[1], row[2], row[3], row[4], row[5], self.vault.load_event(self, row[0], row[6]))

    # -- runs ----------------------------------------------------------------------------------

    def get_run(self, run_id: str) -> RunRecord | None:
        row = self._exec(_SQL["get_run"], (run_id,)).fetchone()
        return _run(row) if row else None

    def insert_run(self, run: RunRecord) -> None:
        self._exec(
            _SQL["insert_run"],
            (
                run.run_id,
                run.principal,
                run.mode.value,
                run.scope.actor,
                run.scope.tenant,
                run.scope.environment,
                dumps(dict(run.labels)),
                run.created_at,
            ),
        )
        if self.vault.seals:  # its data key, in the run's own first transaction
            self.vault.new_run_key(self, run.run_id)

    def list_runs(
        self,
        *,
        actor: str | None = None,
        tenant: str | None = None,
        since: str | None = None,
        before: tuple[str, str] | None = None,
        limit: int | None = None,
        contains: Sequence[tuple[str, str]] = (),
        opened_before: str | None = None,
    ) -> list[RunRecord]:
        """Runs newest first; `before` is the (created_at, run_id) of the last run of the previous page;
        `contains`: (where, text) pairs, each text found whatever its case in the run's `actor`, its
        `tenant`, or `any` of its id, actor, tenant, environment, labels and its steps' tools;
        `opened_before`: a time."""
        params: list[Any] = []
        sql = fill(
            _SQL["list_runs"],
            opened_before=optional(_SQL["runs_created_before"], params, opened_before),
            of_actor=optional(_SQL["runs_of_actor"], params, actor),
            of_tenant=optional(_SQL["runs_of_tenant"], params, tenant),
            contains=" ".join(_containing(part, text, params) for part, text in contains),
            since=optional(_SQL["runs_created_since"], params, since),
            before=optional(_SQL["runs_before"], params, *_page(before)),
            limit=optional(LIMIT, params, limit),
        )
        return [_run(r) for r in self._exec(sql, params).fetchall()]

    def runs_opened_before(self, at: str, after: tuple[str, str] | None = None, limit: int = 500) -> list[RunRecord]:
        """Runs opened before `at`, oldest first; `after` is the (created_at, run_id) of the last run of the
        previous batch."""
        params: list[Any] = [at]
        sql = fill(_SQL["runs_opened_before"], after=optional(_SQL["runs_after"], params, *_page(after)))
        return [_run(r) for r in self._exec(sql, [*params, limit]).fetchall()]

    def count_runs(self, *, opened_before: str, tenant: str | None = None, principal: str | None = None) -> int:
        """How many runs were opened before a time (of `tenant`, of `principal`, when given)."""
        params: list[Any] = [opened_before]
        sql = fill(_SQL["count_runs"], of_tenant=optional(_SQL["runs_of_tenant"], params, tenant),
                   of_principal=optional(_SQL["runs_of_principal"], params, principal))
        return int(self._exec(sql, params).fetchone()[0])

    # -- steps ---------------------------------------------------------------------------------

    def insert_step(self, rec: StepRecord) -> None:
        """Insert a step under the number it carries (imports and seeding; recording uses `insert_next_step`)."""
        self._exec(
            _SQL["insert_step"],
            (
                rec.run_id,
                rec.step,
                rec.tool,
                self.vault.dump(self, rec.run_id, "args", rec.args),
                dumps(list(rec.depends_on)),
                int(rec.compensation_needs_approval),
                rec.manifest_digest,
                rec.dup_key,
            ),
        )

    def insert_next_step(self, rec: StepRecord) -> StepRecord:
        """Insert the run's next step (`rec.step` is ignored) and return it with its number.

        Raises:
            NotFound: the run is not in the store (pruned since its caller read it).
        """
        row = self._exec(
            _SQL["insert_next_step"],  # no row, and no step, for a run that is gone
            (
                rec.run_id,
                rec.run_id,
                rec.tool,
                self.vault.dump(self, rec.run_id, "args", rec.args),
                dumps(list(rec.depends_on)),
                int(rec.compensation_needs_approval),
                rec.manifest_digest,
                rec.dup_key,
                rec.run_id,
            ),
        ).fetchone()
        if row is None:
            raise NotFound(f"no run {rec.run_id}")
        return replace(rec, step=int(row[0]))

    def step_record(self, run_id: str, step: int) -> StepRecord | None:
        row = self._exec(_SQL["step_record"], (run_id, step)).fetchone()
        return self._step(row) if row else None

    def step_records(self, run_id: str) -> list[StepRecord]:
        rows = self._exec(_SQL["step_records"], (run_id,))
        return [self._step(r) for r in rows.fetchall()]

    def steps_with_dup_key(self, dup_key: str) -> list[StepRecord]:
        rows = self._exec(_SQL["steps_with_dup_key"], (dup_key,)).fetchall()
        return [self._step(r) for r in rows]

    # -- events --------------------------------------------------------------------------------

    def append(self, run_id: str, events: Sequence[NewEvent]) -> list[Event]:
        """Append events to a run's journal, numbering them on from its last `seq`.

        The first insert numbers itself (one round trip instead of a read and a write); callers hold
        the run's write lock, so nobody else numbers events of this run meanwhile.
        """
        at = utc_now()
        written: list[Event] = []
        for ev in events:
            stored = self.vault.dump_event(self, run_id, dict(ev.data))
            values = (ev.step, ev.type.value, at, ev.actor, stored, ev.data.get("approval_id"))
            if written:
                seq = written[-1].seq + 1
                self._exec(_SQL["insert_event"], (run_id, seq, *values))
            else:
                row = self._exec(_SQL["insert_first_event"], (run_id, *values, run_id)).fetchone()
                seq = int(row[0])
            written.append(Event(run_id, seq, ev.step, ev.type.value, at, ev.actor, ev.data))
        return written

    def run_events(self, run_id: str, *, after: int | None = None, limit: int | None = None) -> list[Event]:
        """A run's events in `seq` order: those after `after` (a `seq`), at most `limit` of them."""
        params: list[Any] = [run_id]
        sql = fill(_SQL["run_events"], after=optional(_SQL["events_after"], params, after),
                   limit=optional(LIMIT, params, limit))
        return [self._event(r) for r in self._exec(sql, params).fetchall()]

    def checkpoint_events(self, run_id: str) -> list[Event]:
        """A run's `checkpoint` events in `seq` order."""
        rows = self._exec(_SQL["checkpoint_events"], (run_id, EventType.CHECKPOINT.value))
        return [self._event(r) for r in rows.fetchall()]

    def step_count(self, run_id: str) -> int:
        """How many steps the run has (its last step's number is one less)."""
        return int(self._exec(_SQL["step_count"], (run_id,)).fetchone()[0])

    def step_events(self, run_id: str, step: int, *, lock_run: bool = False) -> list[Event]:
        """A step's events in seq order; with `lock_run`, also take the run's write lock (`lock_run()`)."""
        sql, lock = self._guarded(_STEP_EVENTS, run_id if lock_run else None)
        rows = self._exec(sql, (*lock, run_id, step))
        return [self._event(r) for r in rows.fetchall()]

    def export(self, since: str | None = None) -> Iterator[Event]:
        """Every run's events, run by run (oldest run first), each run in `seq` order."""
        params: list[Any] = []
        sql = fill(_SQL["export"], since=optional(_SQL["export_since"], params, since))
        for row in self._exec(sql, params).fetchall():
            yield self._event(row)

    def run_summary(self, run: RunRecord) -> RunSummary:
        """The run with the count of its steps in each status, read from each step's last status event.

        Listings use this rather than `snapshot`: the database picks the one event per step that
        decides its status, so Python decodes one row per step, not every event of the run.
        """
        rows = self._exec(_SQL["run_summary"], (run.run_id, run.run_id)).fetchall()
        statuses = [StepStatus(json.loads(data)["status"]) if type_ == EventType.RESOLVED else StepStatus(type_)
                    for type_, data in rows]
        return RunSummary.of(run, statuses)

    def runs_with_steps_in(self, statuses: Sequence[str], *, tenant: str | None = None,
                           principal: str | None = None) -> dict[str, set[str]]:
        """For each of `statuses` (not `succeeded` or `failed`, which a `resolved` event also gives),
        the runs (of `tenant`, of `principal`, when given) with a step in it now, read from each step's
        last status event, as `run_summary` reads them: counted in the database, whatever their number."""
        params: list[str] = list(statuses)
        sql = fill(_SQL["runs_with_steps_in"], statuses=marks(len(statuses)),
                   of_tenant=optional(_SQL["steps_in_of_tenant"], params, tenant),
                   of_principal=optional(_SQL["steps_in_of_principal"], params, principal))
        found: dict[str, set[str]] = {status: set() for status in statuses}
        for type_, run_id in self._exec(sql, params).fetchall():
            found[type_].add(run_id)
        return found

    def step_statuses(self, steps: Sequence[tuple[str, int]]) -> dict[tuple[str, int], StepStatus]:
        """The status of each of these (run, step) pairs that exists, from its last status event."""
        by_run: dict[str, set[int]] = defaultdict(set)
        for run_id, step in steps:
            by_run[run_id].add(step)
        found: dict[tuple[str, int], StepStatus] = {}
        for run_id, numbers in by_run.items():
            wanted = sorted(numbers)
            for start in range(0, len(wanted), CHUNK):
                chunk = wanted[start : start + CHUNK]
                rows = self._exec(fill(_SQL["step_statuses"], steps=marks(len(chunk))), [run_id, *chunk]).fetchall()
                for step, type_, data in rows:  # the last one of each step wins
                    found[(run_id, step)] = (StepStatus(json.loads(data)["status"]) if type_ == EventType.RESOLVED
                                             else StepStatus(type_))
        return found

    def snapshot(self, run_id: str) -> RunSnapshot | None:
        """The run and every step's derived state, read in this transaction."""
        run = self.get_run(run_id)
        if run is None:
            return None
        with gc_paused():
            return self._snapshot(run)

    def _snapshot(self, run: RunRecord) -> RunSnapshot:
        run_id = run.run_id
        records = self._exec(_SQL["step_records"], (run_id,)).fetchall()
        events = self._exec(_SQL["snapshot_events"], (run_id,)).fetchall()
        load_event, states = self.vault.load_event, []
        i, n = 0, len(events)
        for row in records:  # both in step order: each step's events are the next rows of `events`
            step = row[1]
            while i < n and events[i][0] < step:  # events of a step with no row (none, as written)
                i += 1
            start = i
            while i < n and events[i][0] == step:
                i += 1
            states.append(derive_step_rows(self._step(row), [
                (kind, at, actor, load_event(self, run_id, text) if data_read(kind, text) else NO_DATA)
                for _, kind, at, actor, text in events[start:i]]))
        return RunSnapshot(run, tuple(states))

    def snapshots(self, runs: Sequence[RunRecord]) -> list[RunSnapshot]:
        """`snapshot` of each run, in their order, read with two statements per 500 runs (a listing's page)."""
        found: list[RunSnapshot] = []
        with gc_paused():
            for start in range(0, len(runs), CHUNK):
                chunk = runs[start : start + CHUNK]
                ids = [r.run_id for r in chunk]
                records: dict[str, list[StepRecord]] = defaultdict(list)
                for row in self._exec(fill(_SQL["steps_of_runs"], runs=marks(len(ids))), ids).fetchall():
                    records[row[0]].append(self._step(row))
                events = self._folded_events(
                    self._exec(fill(_SQL["folded_events_of_runs"], runs=marks(len(ids))), ids).fetchall())
                found += [RunSnapshot(run, tuple(derive_step_rows(rec, events.get((run.run_id, rec.step), ()))
                                                 for rec in records.get(run.run_id, ()))) for run in chunk]
        return found

    def _folded_events(self, rows: list[Any]) -> dict[tuple[str, int], list[FoldedEvent]]:
        """Step events as `derive_step_rows` folds them, by (run, step), each in the rows' order; the data
        of each is decoded only where the fold reads it (`data_read`)."""
        by_step: dict[tuple[str, int], list[FoldedEvent]] = defaultdict(list)
        load_event = self.vault.load_event
        for run_id, step, kind, at, actor, text in rows:
            by_step[(run_id, step)].append(
                (kind, at, actor, load_event(self, run_id, text) if data_read(kind, text) else NO_DATA))
        return by_step

