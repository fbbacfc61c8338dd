"""The ledger's SQL, shared by both back ends: one `Queries` object per transaction.

The SQL is portable; each back end supplies a cursor whose placeholders are `?` and the few
statements that differ (row locks, advisory locks), through `Dialect`.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

from reversi.core.gc_pause import gc_paused
from reversi.core.json_values import compact as dumps
from reversi.core.models import (
    Approval,
    ApprovalKind,
    ApprovalStatus,
    Event,
    EventType,
    Halt,
    HaltScope,
    Mode,
    NewEvent,
    RunRecord,
    RunSnapshot,
    RunSummary,
    Scope,
    StepRecord,
    StepStatus,
    derive_step,
    utc_now,
)
from reversi.errors import BadInput


class Cursor(Protocol):
    def execute(self, sql: str, params: Sequence[Any] = ()) -> Any: ...
    def fetchone(self) -> Any: ...
    def fetchall(self) -> list[Any]: ...


class Dialect(Protocol):
    # Whether writers of a run must lock its row (PostgreSQL); SQLite's BEGIN IMMEDIATE already
    # serialises every writer of the file.
    row_locks: bool

    def sql(self, text: str) -> str:
        """The statement with `?` placeholders turned into the driver's own."""

    def lock_run(self, cur: Cursor, run_id: str) -> None:
        """Serialise writers of one run until the transaction ends."""

    def lock_name(self, cur: Cursor, name: str) -> None:
        """Serialise writers that share `name` (a duplicate key, the halt stream) until the end."""


@dataclass(frozen=True)
class ApprovalRow:
    approval_id: str
    run_id: str
    step: int | None
    kind: ApprovalKind
    tool: str
    args: Any
    call_digest: str
    requested_by: str
    requested_at: str


# The event types that set a step's status (`resolved` sets the one in its data).
_STATUS_EVENTS = ("intended", "succeeded", "failed", "uncertain", "resolved", "compensating", "compensated",
                  "compensation_failed")
_RUN_COLUMNS = "run_id, principal, mode, actor, tenant, environment, labels, created_at"
_STEP_COLUMNS = "run_id, step, tool, args, depends_on, compensation_needs_approval, manifest_digest, dup_key"
_EVENT_COLUMNS = "run_id, seq, step, type, at, actor, data"
_APPROVAL_COLUMNS = "approval_id, run_id, step, kind, tool, args, call_digest, requested_by, requested_at"
_DECISIONS = {ApprovalStatus.APPROVED: "approval_granted", ApprovalStatus.DENIED: "approval_denied"}
_CHUNK = 500  # ids per `IN (...)`: well under every back end's limit of parameters


_SEARCHED = {"any": ("run_id", "actor", "tenant", "environment"), "actor": ("actor",), "tenant": ("tenant",)}


def _where(conditions: Sequence[str]) -> str:
    return " WHERE " + " AND ".join(conditions) if conditions else ""


def _approval_row(r: Any) -> ApprovalRow:
    return ApprovalRow(r[0], r[1], r[2], ApprovalKind(r[3]), r[4], json.loads(r[5]), r[6], r[7], r[8])


def _run(row: Any) -> RunRecord:
    return RunRecord(row[0], row[1], Mode(row[2]), Scope(row[3], row[4], row[5]), json.loads(row[6]), row[7])


def _step(row: Any) -> StepRecord:
    return StepRecord(
        row[0], row[1], row[2], json.loads(row[3]), tuple(json.loads(row[4])), bool(row[5]), row[6], row[7]
    )


def _event(row: Any) -> Event:
    return Event(row[0], row[1], row[2], row[3], row[4], row[5], json.loads(row[6]))


def _too_large(params: Sequence[Any]) -> str:
    big = [p for p in params if isinstance(p, int) and not isinstance(p, bool) and not -(2**63) <= p < 2**63]
    return str(big[0]) if big else "past 64 bits"


class Queries:
    """Every read and write of the ledger, inside one transaction of the back end's choosing."""

    def __init__(self, cur: Cursor, dialect: Dialect) -> None:
        self._cur = cur
        self._dialect = dialect

    def _exec(self, sql: str, params: Sequence[Any] = ()) -> Cursor:
        for p in params:  # a loop, not any(): this runs for every statement
            if type(p) is str and "\x00" in p:  # PostgreSQL's text cannot hold it; keep both alike
                raise BadInput("text with a NUL character (\\x00) cannot be stored")
        try:
            self._cur.execute(self._dialect.sql(sql), params)
        except UnicodeEncodeError as exc:  # a lone surrogate (from a "\ud800" escape) has no UTF-8 form
            raise BadInput(f"text that is not valid Unicode cannot be stored: {exc.reason} "
                           f"({exc.object[exc.start:exc.end]!r})") from None
        except OverflowError:  # SQLite's integers are 64-bit (a step number from a typo, say)
            raise BadInput(f"a number is too large: {_too_large(params)}") from None
        return self._cur

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Cursor:
        """Run one portable statement (`?` placeholders) in this transaction; for the store's other modules."""
        return self._exec(sql, params)

    # -- locks ---------------------------------------------------------------------------------

    def lock_run(self, run_id: str) -> None:
        self._dialect.lock_run(self._cur, run_id)

    def lock_name(self, name: str) -> None:
        self._dialect.lock_name(self._cur, name)

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

    def list_runs(
        self,
        *,
        actor: str | None = None,
        tenant: str | None = None,
        since: str | None = None,
        before: tuple[str, str] | None = None,
        limit: int | None = None,
        contains: Sequence[tuple[str, str]] = (),
    ) -> list[RunRecord]:
        """Runs newest first; `before` is the (created_at, run_id) of the last run of the previous page;
        `contains`: (where, text) pairs, each text found whatever its case in the run's `actor`, its
        `tenant`, or `any` of its id, actor, tenant and environment."""
        where, params = [], []
        for column, value in (("actor", actor), ("tenant", tenant)):
            if value is not None:
                where.append(f"{column} = ?")
                params.append(value)
        for part, text in contains:
            columns = _SEARCHED[part]
            pattern = "%" + text.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
            where.append("(" + " OR ".join(f"LOWER({c}) LIKE ? ESCAPE '\\'" for c in columns) + ")")
            params.extend([pattern] * len(columns))
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

    # -- steps ---------------------------------------------------------------------------------

    def insert_step(self, rec: StepRecord) -> None:
        """Insert a step under the number it carries (imports and seeding; recording uses `insert_next_step`)."""
        self._exec(
            f"INSERT INTO steps ({_STEP_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (
                rec.run_id,
                rec.step,
                rec.tool,
                dumps(rec.args),
                dumps(list(rec.depends_on)),
                int(rec.compensation_needs_approval),
                rec.manifest_digest,
                rec.dup_key,
            ),
        )

    def insert_next_step(self, rec: StepRecord) -> StepRecord:
        """Insert the run's next step (`rec.step` is ignored) and return it with its number."""
        row = self._exec(
            f"INSERT INTO steps ({_STEP_COLUMNS}) "
            "SELECT ?, COALESCE(MAX(step), -1) + 1, ?, ?, ?, ?, ?, ? FROM steps WHERE run_id = ? RETURNING step",
            (
                rec.run_id,
                rec.tool,
                dumps(rec.args),
                dumps(list(rec.depends_on)),
                int(rec.compensation_needs_approval),
                rec.manifest_digest,
                rec.dup_key,
                rec.run_id,
            ),
        ).fetchone()
        return replace(rec, step=int(row[0]))

    def step_record(self, run_id: str, step: int) -> StepRecord | None:
        row = self._exec(f"SELECT {_STEP_COLUMNS} FROM steps WHERE run_id = ? AND step = ?", (run_id, step)).fetchone()
        return _step(row) if row else None

    def step_records(self, run_id: str) -> list[StepRecord]:
        rows = self._exec(f"SELECT {_STEP_COLUMNS} FROM steps WHERE run_id = ? ORDER BY step", (run_id,))
        return [_step(r) for r in rows.fetchall()]

    def steps_with_dup_key(self, dup_key: str) -> list[StepRecord]:
        rows = self._exec(f"SELECT {_STEP_COLUMNS} FROM steps WHERE dup_key = ?", (dup_key,)).fetchall()
        return [_step(r) for r in rows]

    # -- events --------------------------------------------------------------------------------

    def append(self, run_id: str, events: Sequence[NewEvent]) -> list[Event]:
        """Append events to a run's journal, numbering them on from its last `seq`.

        The first insert numbers itself (one round trip instead of a read and a write); callers hold
        the run's write lock, so nobody else numbers events of this run meanwhile.
        """
        at = utc_now()
        written: list[Event] = []
        for ev in events:
            values = (ev.step, ev.type.value, at, ev.actor, dumps(dict(ev.data)), ev.data.get("approval_id"))
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
        return [_event(r) for r in self._exec(sql, params).fetchall()]

    def step_events(self, run_id: str, step: int, *, lock_run: bool = False) -> list[Event]:
        """A step's events in seq order; with `lock_run`, also take the run's write lock (`lock_run()`)."""
        prefix, guard, params = self._run_guard(run_id if lock_run else None)
        rows = self._exec(
            f"{prefix}SELECT {_EVENT_COLUMNS} FROM events WHERE run_id = ? AND step = ?{guard} ORDER BY seq",
            (*params, run_id, step),
        )
        return [_event(r) for r in rows.fetchall()]

    def _run_guard(self, run_id: str | None) -> tuple[str, str, tuple[str, ...]]:
        """SQL that takes a run's row lock within a query that reads something else.

        It saves a round trip on the journal's hot path: the lock is a CTE whose row count a one-time
        filter of the query reads, so PostgreSQL takes it before reading anything.
        """
        if run_id is None or not self._dialect.row_locks:
            return "", "", ()
        cte = "WITH locked AS (SELECT run_id FROM runs WHERE run_id = ? FOR UPDATE) "
        return cte, " AND (SELECT count(*) FROM locked) >= 0", (run_id,)

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
            yield _event(row)

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

    def snapshot(self, run_id: str) -> RunSnapshot | None:
        """The run and every step's derived state, read in this transaction."""
        run = self.get_run(run_id)
        if run is None:
            return None
        with gc_paused():
            return self._snapshot(run)

    def _snapshot(self, run: RunRecord) -> RunSnapshot:
        run_id = run.run_id
        by_step: dict[int, list[Event]] = defaultdict(list)
        for ev in self.run_events(run_id):
            if ev.step is not None:
                by_step[ev.step].append(ev)
        steps = tuple(derive_step(rec, by_step.get(rec.step, ())) for rec in self.step_records(run_id))
        return RunSnapshot(run, steps)

    def snapshots(self, runs: Sequence[RunRecord]) -> list[RunSnapshot]:
        """`snapshot` of each run, in their order, read with two statements per 500 runs (a listing's page)."""
        found: list[RunSnapshot] = []
        with gc_paused():
            for start in range(0, len(runs), _CHUNK):
                chunk = runs[start : start + _CHUNK]
                ids = [r.run_id for r in chunk]
                marks = ", ".join("?" for _ in ids)
                records: dict[str, list[StepRecord]] = defaultdict(list)
                for row in self._exec(f"SELECT {_STEP_COLUMNS} FROM steps WHERE run_id IN ({marks}) "
                                      "ORDER BY run_id, step", ids).fetchall():
                    records[row[0]].append(_step(row))
                events: dict[tuple[str, int], list[Event]] = defaultdict(list)
                for row in self._exec(f"SELECT {_EVENT_COLUMNS} FROM events WHERE run_id IN ({marks}) "
                                      "AND step IS NOT NULL ORDER BY run_id, seq", ids).fetchall():
                    events[(row[0], row[2])].append(_event(row))
                found += [RunSnapshot(run, tuple(derive_step(rec, events.get((run.run_id, rec.step), ()))
                                                 for rec in records.get(run.run_id, ()))) for run in chunk]
        return found

    # -- approvals -----------------------------------------------------------------------------

    def insert_approval(self, row: ApprovalRow) -> None:
        self._exec(
            f"INSERT INTO approvals ({_APPROVAL_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                row.approval_id,
                row.run_id,
                row.step,
                row.kind.value,
                row.tool,
                dumps(row.args),
                row.call_digest,
                row.requested_by,
                row.requested_at,
            ),
        )

    def _approval_rows(self, where: str, params: Sequence[Any]) -> list[ApprovalRow]:
        rows = self._exec(
            f"SELECT {_APPROVAL_COLUMNS} FROM approvals WHERE {where} ORDER BY requested_at, approval_id", params
        ).fetchall()
        return [_approval_row(r) for r in rows]

    def _with_status(self, rows: list[ApprovalRow]) -> list[Approval]:
        if not rows:
            return []
        events: dict[str, list[tuple[str, str, str, Mapping[str, Any]]]] = defaultdict(list)
        ids = [r.approval_id for r in rows]
        for chunk_start in range(0, len(ids), _CHUNK):
            chunk = ids[chunk_start : chunk_start + _CHUNK]
            marks = ", ".join("?" for _ in chunk)
            found = self._exec(
                f"SELECT approval_id, type, at, actor, data FROM events "
                f"WHERE approval_id IN ({marks}) ORDER BY run_id, seq",
                chunk,
            ).fetchall()
            for approval_id, type_, at, actor, data in found:
                events[approval_id].append((type_, at, actor, json.loads(data)))
        return [_derive_approval(r, events.get(r.approval_id, [])) for r in rows]

    def get_approval(self, approval_id: str) -> Approval | None:
        found = self._with_status(self._approval_rows("approval_id = ?", (approval_id,)))
        return found[0] if found else None

    def approvals_for_call(self, run_id: str, kind: ApprovalKind, call_digest: str) -> list[Approval]:
        rows = self._approval_rows("run_id = ? AND kind = ? AND call_digest = ?", (run_id, kind.value, call_digest))
        return self._with_status(rows)

    def list_approvals(
        self,
        run_id: str | None = None,
        *,
        status: ApprovalStatus | None = None,
        tenant: str | None = None,
        after: tuple[int, str, str] | None = None,
        limit: int | None = None,
    ) -> list[Approval]:
        """Approvals pending first, then oldest first; filtered by run, status and the tenant of their
        run. `after` is (0 pending, else 1; requested_at; approval_id) of the last approval of the previous page."""
        inner: list[str] = []
        params: list[Any] = []
        if run_id is not None:
            inner.append("a.run_id = ?")
            params.append(run_id)
        if tenant is not None:
            inner.append("r.tenant = ?")
            params.append(tenant)
        outer: list[str] = []
        outer_params: list[Any] = []
        if status is not None:
            outer.append("y.decision IS NULL" if status is ApprovalStatus.PENDING else "y.decision = ?")
            outer_params += [] if status is ApprovalStatus.PENDING else [_DECISIONS[status]]
        if after is not None:
            outer.append("(y.decided > ? OR (y.decided = ? AND (y.requested_at > ? OR (y.requested_at = ? "
                         "AND y.approval_id > ?))))")
            outer_params += [after[0], after[0], after[1], after[1], after[2]]
        decision = ("(SELECT e.type FROM events e WHERE e.approval_id = a.approval_id AND e.type IN "
                    "('approval_granted', 'approval_denied') ORDER BY e.seq DESC LIMIT 1)")
        sql = (f"SELECT {', '.join('a.' + c for c in _APPROVAL_COLUMNS.split(', '))}, {decision} AS decision "
               "FROM approvals a JOIN runs r ON r.run_id = a.run_id" + _where(inner))
        sql = f"SELECT x.*, CASE WHEN x.decision IS NULL THEN 0 ELSE 1 END AS decided FROM ({sql}) x"
        sql = (f"SELECT {', '.join('y.' + c for c in _APPROVAL_COLUMNS.split(', '))} FROM ({sql}) y"
               + _where(outer) + " ORDER BY y.decided, y.requested_at, y.approval_id")
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        return self._with_status([_approval_row(r) for r in self._exec(sql, [*params, *outer_params]).fetchall()])

    # -- halts ---------------------------------------------------------------------------------

    def append_system(
        self, type_: EventType, actor: str, halt_id: str, data: Mapping[str, Any], tenant: str | None = None
    ) -> str:
        """Append to the halts' stream; `tenant` is a new halt's tenant scope ("" for every tenant)."""
        self.lock_name("system_events")
        row = self._exec("SELECT MAX(seq) FROM system_events").fetchone()
        seq = 0 if row[0] is None else int(row[0]) + 1
        at = utc_now()
        self._exec(
            "INSERT INTO system_events (seq, type, at, actor, halt_id, data, tenant) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (seq, type_.value, at, actor, halt_id, dumps(dict(data)), tenant),
        )
        return at

    def active_halts(self, *, lock_run: str | None = None, tenant: str | None = None) -> list[Halt]:
        """The halts in force (with `tenant`, those scoped to exactly that tenant); with `lock_run`,
        also take that run's write lock (`lock_run()`)."""
        prefix, guard, params = self._run_guard(lock_run)
        of_tenant = " AND (a.tenant = ? OR a.tenant IS NULL)" if tenant is not None else ""
        rows = self._exec(
            f"{prefix}SELECT a.halt_id, a.actor, a.at, a.data, a.tenant FROM system_events a "
            f"WHERE a.type = 'halt_added'{of_tenant} AND NOT EXISTS (SELECT 1 FROM system_events b "
            f"WHERE b.type = 'halt_lifted' AND b.halt_id = a.halt_id){guard} ORDER BY a.seq",
            (*params, *([tenant] if tenant is not None else [])),
        ).fetchall()
        halts = []
        for halt_id, by, at, data, column in rows:
            d = json.loads(data)
            halt = Halt(halt_id, d["reason"], HaltScope(**d.get("scope", {})), by, at)
            if column is not None or tenant is None or halt.scope.tenant == tenant:  # NULL: added before 0005
                halts.append(halt)
        return halts

    def system_events(self, since: str | None = None) -> list[Event]:
        sql = "SELECT seq, type, at, actor, halt_id, data FROM system_events"
        params: list[Any] = []
        if since is not None:
            sql += " WHERE at >= ?"
            params.append(since)
        rows = self._exec(sql + " ORDER BY seq", params).fetchall()
        return [Event(None, r[0], None, r[1], r[2], r[3], {"halt_id": r[4], **json.loads(r[5])}) for r in rows]


def _derive_approval(row: ApprovalRow, events: list[tuple[str, str, str, Mapping[str, Any]]]) -> Approval:
    status, decided_by, decided_at, note, used = ApprovalStatus.PENDING, None, None, None, False
    for type_, at, actor, data in events:
        if type_ == EventType.APPROVAL_GRANTED:
            status, decided_by, decided_at, note = ApprovalStatus.APPROVED, actor, at, data.get("note")
        elif type_ == EventType.APPROVAL_DENIED:
            status, decided_by, decided_at, note = ApprovalStatus.DENIED, actor, at, data.get("note")
        elif type_ in (EventType.INTENDED, EventType.COMPENSATING):
            used = True
    return Approval(
        row.approval_id,
        row.run_id,
        row.step,
        row.kind,
        row.tool,
        row.args,
        status,
        row.requested_by,
        row.requested_at,
        decided_by,
        decided_at,
        note,
        used,
    )
