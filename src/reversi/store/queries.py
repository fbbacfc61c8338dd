"""The ledger's SQL, shared by both back ends: one `Queries` object per transaction.

The SQL is portable; each back end supplies a cursor whose placeholders are `?` and the few
statements that differ (row locks, advisory locks), through `Dialect` (`statements.py`). Every
table's SQL is a method of a query class (`ApprovalQueries`, `DrillQueries`, `HaltQueries`, `JobQueries`,
`KeyQueries`, `LeaseQueries`, `ResourceQueries`, `RetentionQueries`, `ScopeJobQueries`, `SecretQueries`,
`SessionQueries`, and the runs, steps and events here); `Queries` is all of them.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any

from reversi.core.gc_pause import gc_paused
from reversi.core.json_values import compact as dumps
from reversi.core.json_values import loads
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
from reversi.store.statements import CHUNK

# The event types that set a step's status (`resolved` sets the one in its data).
_STATUS_EVENTS = ("intended", "succeeded", "failed", "uncertain", "resolved", "compensating", "compensated",
                  "compensation_failed")
_RUN_COLUMNS = "run_id, principal, mode, actor, tenant, environment, labels, created_at"
_STEP_COLUMNS = "run_id, step, tool, args, depends_on, compensation_needs_approval, manifest_digest, dup_key"
_EVENT_COLUMNS = "run_id, seq, step, type, at, actor, data"
_FOLDED_COLUMNS = "run_id, step, type, at, actor, data"  # what folding a step's events reads of them
FoldedEvent = tuple[str, str, str, Mapping[str, Any]]  # (type, at, actor, data), as `derive_step_rows` takes it
# Where a search looks: columns of `runs`, and for `any` the tools its steps called too ("stripe.").
_SEARCHED = {"any": ("run_id", "actor", "tenant", "environment", "labels"), "actor": ("actor",), "tenant": ("tenant",)}
_TOOL_SEARCHED = "EXISTS (SELECT 1 FROM steps s WHERE s.run_id = runs.run_id AND LOWER(s.tool) LIKE ? ESCAPE '\\')"


def _run(row: Any) -> RunRecord:
    return RunRecord(row[0], row[1], Mode(row[2]), Scope(row[3], row[4], row[5]), json.loads(row[6]), row[7])




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
        row = self._exec(f"SELECT {_RUN_COLUMNS} FROM runs WHERE run_id = ?", (run_id,)).fetchone()
        return _run(row) if row else None

    def insert_run(self, run: RunRecord) -> None:
        self._exec(
            f"INSERT INTO runs ({_RUN_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
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
        where, params = [], []
        if opened_before is not None:
            where.append("created_at < ?")
            params.append(opened_before)
        for column, value in (("actor", actor), ("tenant", tenant)):
            if value is not None:
                where.append(f"{column} = ?")
                params.append(value)
        for part, text in contains:
            columns = _SEARCHED[part]
            pattern = "%" + text.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
            found = [f"LOWER({c}) LIKE ? ESCAPE '\\'" for c in columns] + ([_TOOL_SEARCHED] if part == "any" else [])
            where.append("(" + " OR ".join(found) + ")")
            params.extend([pattern] * len(found))
        if since is not None:
            where.append("created_at >= ?")
            params.append(since)
        if before is not None:
            where.append("(created_at < ? OR (created_at = ? AND run_id < ?))")
            params.extend([before[0], before[0], before[1]])
        sql = f"SELECT {_RUN_COLUMNS} FROM runs"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY created_at DESC, run_id DESC"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        return [_run(r) for r in self._exec(sql, params).fetchall()]

    def runs_opened_before(self, at: str, after: tuple[str, str] | None = None, limit: int = 500) -> list[RunRecord]:
        """Runs opened before `at`, oldest first; `after` is the (created_at, run_id) of the last run of the
        previous batch."""
        sql, params = f"SELECT {_RUN_COLUMNS} FROM runs WHERE created_at < ?", [at]
        if after is not None:
            sql += " AND (created_at > ? OR (created_at = ? AND run_id > ?))"
            params += [after[0], after[0], after[1]]
        sql += f" ORDER BY created_at, run_id LIMIT {int(limit)}"
        return [_run(r) for r in self._exec(sql, params).fetchall()]

    def count_runs(self, *, opened_before: str, tenant: str | None = None, principal: str | None = None) -> int:
        """How many runs were opened before a time (of `tenant`, of `principal`, when given)."""
        sql, params = "SELECT COUNT(*) FROM runs WHERE created_at < ?", [opened_before]
        for column, value in (("tenant", tenant), ("principal", principal)):
            if value is not None:
                sql += f" AND {column} = ?"
                params.append(value)
        return int(self._exec(sql, params).fetchone()[0])

    # -- steps ---------------------------------------------------------------------------------

    def insert_step(self, rec: StepRecord) -> None:
        """Insert a step under the number it carries (imports and seeding; recording uses `insert_next_step`)."""
        self._exec(
            f"INSERT INTO steps ({_STEP_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
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
            f"INSERT INTO steps ({_STEP_COLUMNS}) "
            "SELECT ?, COALESCE((SELECT MAX(step) FROM steps WHERE run_id = ?), -1) + 1, ?, ?, ?, ?, ?, ? "
            "FROM runs WHERE run_id = ? RETURNING step",  # no row, and no step, for a run that is gone
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
        row = self._exec(f"SELECT {_STEP_COLUMNS} FROM steps WHERE run_id = ? AND step = ?", (run_id, step)).fetchone()
        return self._step(row) if row else None

    def step_records(self, run_id: str) -> list[StepRecord]:
        rows = self._exec(f"SELECT {_STEP_COLUMNS} FROM steps WHERE run_id = ? ORDER BY step", (run_id,))
        return [self._step(r) for r in rows.fetchall()]

    def steps_with_dup_key(self, dup_key: str) -> list[StepRecord]:
        rows = self._exec(f"SELECT {_STEP_COLUMNS} FROM steps WHERE dup_key = ?", (dup_key,)).fetchall()
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
                self._exec(
                    f"INSERT INTO events ({_EVENT_COLUMNS}, approval_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (run_id, seq, *values),
                )
            else:
                row = self._exec(
                    f"INSERT INTO events ({_EVENT_COLUMNS}, approval_id) "
                    "SELECT ?, COALESCE(MAX(seq), -1) + 1, ?, ?, ?, ?, ?, ? FROM events WHERE run_id = ? RETURNING seq",
                    (run_id, *values, run_id),
                ).fetchone()
                seq = int(row[0])
            written.append(Event(run_id, seq, ev.step, ev.type.value, at, ev.actor, ev.data))
        return written

    def run_events(self, run_id: str, *, after: int | None = None, limit: int | None = None) -> list[Event]:
        """A run's events in `seq` order: those after `after` (a `seq`), at most `limit` of them."""
        sql = f"SELECT {_EVENT_COLUMNS} FROM events WHERE run_id = ?"
        params: list[Any] = [run_id]
        if after is not None:
            sql += " AND seq > ?"
            params.append(after)
        sql += " ORDER BY seq"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        return [self._event(r) for r in self._exec(sql, params).fetchall()]

    def checkpoint_events(self, run_id: str) -> list[Event]:
        """A run's `checkpoint` events in `seq` order."""
        rows = self._exec(
            f"SELECT {_EVENT_COLUMNS} FROM events WHERE run_id = ? AND step IS NULL AND type = ? ORDER BY seq",
            (run_id, EventType.CHECKPOINT.value),
        )
        return [self._event(r) for r in rows.fetchall()]

    def step_count(self, run_id: str) -> int:
        """How many steps the run has (its last step's number is one less)."""
        return int(self._exec("SELECT COUNT(*) FROM steps WHERE run_id = ?", (run_id,)).fetchone()[0])

    def step_events(self, run_id: str, step: int, *, lock_run: bool = False) -> list[Event]:
        """A step's events in seq order; with `lock_run`, also take the run's write lock (`lock_run()`)."""
        prefix, guard, params = self._run_guard(run_id if lock_run else None)
        rows = self._exec(
            f"{prefix}SELECT {_EVENT_COLUMNS} FROM events WHERE run_id = ? AND step = ?{guard} ORDER BY seq",
            (*params, run_id, step),
        )
        return [self._event(r) for r in rows.fetchall()]

    def export(self, since: str | None = None) -> Iterator[Event]:
        """Every run's events, run by run (oldest run first), each run in `seq` order."""
        sql = (
            f"SELECT {', '.join('e.' + c for c in _EVENT_COLUMNS.split(', '))} FROM events e "
            "JOIN runs r ON r.run_id = e.run_id"
        )
        params: list[Any] = []
        if since is not None:
            sql += " WHERE e.at >= ?"
            params.append(since)
        sql += " ORDER BY r.created_at, e.run_id, e.seq"
        for row in self._exec(sql, params).fetchall():
            yield self._event(row)

    def run_summary(self, run: RunRecord) -> RunSummary:
        """The run with the count of its steps in each status, read from each step's last status event.

        Listings use this rather than `snapshot`: the database picks the one event per step that
        decides its status, so Python decodes one row per step, not every event of the run.
        """
        kinds = ", ".join(f"'{t}'" for t in _STATUS_EVENTS)
        rows = self._exec(
            "SELECT e.type, e.data FROM events e JOIN (SELECT step, MAX(seq) AS seq FROM events "
            f"WHERE run_id = ? AND step IS NOT NULL AND type IN ({kinds}) GROUP BY step) last "
            "ON e.run_id = ? AND e.seq = last.seq",
            (run.run_id, run.run_id),
        ).fetchall()
        statuses = [StepStatus(json.loads(data)["status"]) if type_ == EventType.RESOLVED else StepStatus(type_)
                    for type_, data in rows]
        return RunSummary.of(run, statuses)

    def runs_with_steps_in(self, statuses: Sequence[str], *, tenant: str | None = None,
                           principal: str | None = None) -> dict[str, set[str]]:
        """For each of `statuses` (not `succeeded` or `failed`, which a `resolved` event also gives),
        the runs (of `tenant`, of `principal`, when given) with a step in it now, read from each step's
        last status event, as `run_summary` reads them: counted in the database, whatever their number."""
        kinds = ", ".join(f"'{t}'" for t in _STATUS_EVENTS)
        wanted = ", ".join("?" for _ in statuses)
        sql = ("SELECT DISTINCT e.type, e.run_id FROM events e JOIN (SELECT run_id, step, MAX(seq) AS seq FROM events "
               f"WHERE step IS NOT NULL AND type IN ({kinds}) GROUP BY run_id, step) last "
               "ON e.run_id = last.run_id AND e.seq = last.seq JOIN runs r ON r.run_id = e.run_id "
               f"WHERE e.type IN ({wanted})")
        params: list[str] = list(statuses)
        for column, value in (("tenant", tenant), ("principal", principal)):
            if value is not None:
                sql += f" AND r.{column} = ?"
                params.append(value)
        found: dict[str, set[str]] = {status: set() for status in statuses}
        for type_, run_id in self._exec(sql, params).fetchall():
            found[type_].add(run_id)
        return found

    def step_statuses(self, steps: Sequence[tuple[str, int]]) -> dict[tuple[str, int], StepStatus]:
        """The status of each of these (run, step) pairs that exists, from its last status event."""
        kinds = ", ".join(f"'{t}'" for t in _STATUS_EVENTS)
        by_run: dict[str, set[int]] = defaultdict(set)
        for run_id, step in steps:
            by_run[run_id].add(step)
        found: dict[tuple[str, int], StepStatus] = {}
        for run_id, numbers in by_run.items():
            wanted = sorted(numbers)
            for start in range(0, len(wanted), CHUNK):
                chunk = wanted[start : start + CHUNK]
                marks = ", ".join("?" for _ in chunk)
                rows = self._exec(f"SELECT step, type, data FROM events WHERE run_id = ? AND step IN ({marks}) "
                                  f"AND type IN ({kinds}) ORDER BY seq", [run_id, *chunk]).fetchall()
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
        records = self._exec(f"SELECT {_STEP_COLUMNS} FROM steps WHERE run_id = ? ORDER BY step", (run_id,)).fetchall()
        events = self._exec("SELECT step, type, at, actor, data FROM events WHERE run_id = ? AND step IS NOT NULL "
                            "ORDER BY step, seq", (run_id,)).fetchall()
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
                marks = ", ".join("?" for _ in ids)
                records: dict[str, list[StepRecord]] = defaultdict(list)
                for row in self._exec(f"SELECT {_STEP_COLUMNS} FROM steps WHERE run_id IN ({marks}) "
                                      "ORDER BY run_id, step", ids).fetchall():
                    records[row[0]].append(self._step(row))
                events = self._folded_events(self._exec(
                    f"SELECT {_FOLDED_COLUMNS} FROM events WHERE run_id IN ({marks}) AND step IS NOT NULL "
                    "ORDER BY run_id, seq", ids).fetchall())
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

