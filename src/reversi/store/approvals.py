"""The SQL of approvals (`approvals`, and the events that decide them): `ApprovalQueries`, part of every
transaction's `Queries`."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from reversi.core.models import Approval, ApprovalKind, ApprovalStatus, EventType
from reversi.store.data_keys import DataKeyQueries
from reversi.store.statements import CHUNK, Statements


@dataclass(frozen=True)
class ApprovalRow:
    approval_id: str
    run_id: str
    step: int | None
    kind: ApprovalKind
    tool: str
    args: Any
    call_key: str  # which call it is for: a forward call's digest of tool and arguments, or the step's number
    requested_by: str
    requested_at: str


_APPROVAL_COLUMNS = "approval_id, run_id, step, kind, tool, args, call_key, requested_by, requested_at"
_DECISIONS = {ApprovalStatus.APPROVED: "approval_granted", ApprovalStatus.DENIED: "approval_denied"}


def _where(conditions: Sequence[str]) -> str:
    return " WHERE " + " AND ".join(conditions) if conditions else ""




class ApprovalQueries(Statements):
    """The SQL of approvals: asked for, listed, and their status derived from the deciding events."""

    def _approval_row(self, r: Any) -> ApprovalRow:
        args = self.vault.load(cast(DataKeyQueries, self), r[1], "approval", r[5])
        return ApprovalRow(r[0], r[1], r[2], ApprovalKind(r[3]), r[4], args, r[6], r[7], r[8])

    def insert_approval(self, row: ApprovalRow) -> None:
        self._exec(
            f"INSERT INTO approvals ({_APPROVAL_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                row.approval_id,
                row.run_id,
                row.step,
                row.kind.value,
                row.tool,
                self.vault.dump(cast(DataKeyQueries, self), row.run_id, "approval", row.args),
                row.call_key,
                row.requested_by,
                row.requested_at,
            ),
        )

    def _approval_rows(self, where: str, params: Sequence[Any]) -> list[ApprovalRow]:
        rows = self._exec(
            f"SELECT {_APPROVAL_COLUMNS} FROM approvals WHERE {where} ORDER BY requested_at, approval_id", params
        ).fetchall()
        return [self._approval_row(r) for r in rows]

    def _with_status(self, rows: list[ApprovalRow]) -> list[Approval]:
        if not rows:
            return []
        events: dict[str, list[tuple[str, str, str, Mapping[str, Any]]]] = defaultdict(list)
        ids = [r.approval_id for r in rows]
        for chunk_start in range(0, len(ids), CHUNK):
            chunk = ids[chunk_start : chunk_start + CHUNK]
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

    def approvals_for_call(self, run_id: str, kind: ApprovalKind, call_key: str) -> list[Approval]:
        rows = self._approval_rows("run_id = ? AND kind = ? AND call_key = ?", (run_id, kind.value, call_key))
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
        return self._with_status([self._approval_row(r) for r in self._exec(sql, [*params, *outer_params]).fetchall()])


def _derive_approval(row: ApprovalRow, events: list[tuple[str, str, str, Mapping[str, Any]]]) -> Approval:
    status, decided_by, decided_at, note, used, principal = ApprovalStatus.PENDING, None, None, None, False, None
    for type_, at, actor, data in events:
        if type_ in (EventType.APPROVAL_GRANTED, EventType.APPROVAL_DENIED):
            status = ApprovalStatus.APPROVED if type_ == EventType.APPROVAL_GRANTED else ApprovalStatus.DENIED
            decided_by, decided_at, note, principal = actor, at, data.get("note"), data.get("principal")
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
        principal,
    )
