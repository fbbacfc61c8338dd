"""The queries of approvals (`approvals`, and the events that decide them): `ApprovalQueries`, part of
every transaction's `Queries`; their SQL is in `approvals.sql`."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from reversi.core.json_values import LooseJSON
from reversi.core.models import Approval, ApprovalKind, ApprovalStatus, EventType
from reversi.store.data_keys import DataKeyQueries
from reversi.store.sql import fill, load, marks, optional
from reversi.store.statements import CHUNK, LIMIT, Statements


@dataclass(frozen=True)
class ApprovalRow:
    approval_id: str
    run_id: str
    step: int | None
    kind: ApprovalKind
    tool: str
    args: LooseJSON
    call_key: str  # which call it is for: a forward call's digest of tool and arguments, or the step's number
    requested_by: str
    requested_at: str


_SQL = load("approvals.sql")
_DECISIONS = {ApprovalStatus.APPROVED: "approval_granted", ApprovalStatus.DENIED: "approval_denied"}



class ApprovalQueries(Statements):
    """The SQL of approvals: asked for, listed, and their status derived from the deciding events."""

    def _approval_row(self, r: Any) -> ApprovalRow:
        args = self.vault.load(cast(DataKeyQueries, self), r[1], "approval", r[5])
        return ApprovalRow(r[0], r[1], r[2], ApprovalKind(r[3]), r[4], args, r[6], r[7], r[8])

    def insert_approval(self, row: ApprovalRow) -> None:
        self._exec(
            _SQL["insert_approval"],
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

    def _approval_rows(self, sql: str, params: Sequence[Any]) -> list[ApprovalRow]:
        return [self._approval_row(r) for r in self._exec(sql, params).fetchall()]

    def _with_status(self, rows: list[ApprovalRow]) -> list[Approval]:
        if not rows:
            return []
        events: dict[str, list[tuple[str, str, str, Mapping[str, LooseJSON]]]] = defaultdict(list)
        ids = [r.approval_id for r in rows]
        for chunk_start in range(0, len(ids), CHUNK):
            chunk = ids[chunk_start : chunk_start + CHUNK]
            found = self._exec(fill(_SQL["approval_events"], approvals=marks(len(chunk))), chunk).fetchall()
            for approval_id, type_, at, actor, data in found:
                events[approval_id].append((type_, at, actor, json.loads(data)))
        return [_derive_approval(r, events.get(r.approval_id, [])) for r in rows]

    def get_approval(self, approval_id: str) -> Approval | None:
        found = self._with_status(self._approval_rows(_SQL["get_approval"], (approval_id,)))
        return found[0] if found else None

    def approvals_for_call(self, run_id: str, kind: ApprovalKind, call_key: str) -> list[Approval]:
        rows = self._approval_rows(_SQL["approvals_for_call"], (run_id, kind.value, call_key))
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
        params: list[Any] = []
        sql = fill(
            _SQL["list_approvals"],
            of_run=optional(_SQL["approvals_of_run"], params, run_id),
            of_tenant=optional(_SQL["approvals_of_tenant"], params, tenant),
            of_status=(_SQL["approvals_pending"] if status is ApprovalStatus.PENDING else
                       optional(_SQL["approvals_decided"], params, None if status is None else _DECISIONS[status])),
            after=optional(_SQL["approvals_after"], params,
                           *((after[0], after[0], after[1], after[1], after[2]) if after is not None else (None,))),
            limit=optional(LIMIT, params, limit),
        )
        return self._with_status(self._approval_rows(sql, params))


def _derive_approval(row: ApprovalRow, events: list[tuple[str, str, str, Mapping[str, LooseJSON]]]) -> Approval:
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
