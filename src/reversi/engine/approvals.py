"""Approvals: requests for a person's decision, decided with a journaled event.

A pending approval can be approved or denied; a denied one can later be approved; an approved one
cannot be denied once it was used. Asking again while a request is pending reuses it.
"""

from __future__ import annotations

import uuid

from reversi.core.json_values import JSONView
from reversi.core.models import (
    Approval,
    ApprovalKind,
    ApprovalStatus,
    EventType,
    NewEvent,
    check_id,
    check_run_id,
    utc_now,
)
from reversi.errors import BadInput, Conflict, NotFound
from reversi.store.approvals import ApprovalRow
from reversi.store.base import Store
from reversi.store.queries import Queries

APPROVE_ALL_NOTE = "approved with the rollback (all pending compensations approved)"


def new_approval_id() -> str:
    return f"apr_{uuid.uuid4().hex}"


def list_approvals(
    store: Store,
    status: str | None = None,
    run_id: str | None = None,
    *,
    tenant: str | None = None,
    after: tuple[int, str, str] | None = None,
    limit: int | None = None,
) -> list[Approval]:
    """Approvals, pending first, then oldest first: of runs of `tenant` when given, at most `limit`,
    from after `after` (the `approval_page_key` of the last one of the previous page).

    Raises:
        BadInput: `status` is not pending, approved or denied; or `run_id` is not a run id.
    """
    if run_id is not None:
        check_run_id(run_id)
    wanted = None
    if status is not None:
        try:
            wanted = ApprovalStatus(status)
        except ValueError:
            raise BadInput(f"status {status!r} is not one of pending, approved, denied") from None
    with store.read() as q:
        return q.list_approvals(run_id, status=wanted, tenant=tenant, after=after, limit=limit)


def approval_page_key(approval: Approval) -> tuple[int, str, str]:
    """Where an approval sits in `list_approvals`' order: the `after` of the page that follows it."""
    return int(approval.status is not ApprovalStatus.PENDING), approval.requested_at, approval.approval_id


def get_approval(store: Store, approval_id: str) -> Approval:
    """One approval.

    Raises:
        BadInput: `approval_id` does not have the form of an approval id.
        NotFound: no such approval.
    """
    check_id("approval", approval_id)
    with store.read() as q:
        found = q.get_approval(approval_id)
    if found is None:
        raise NotFound(f"no approval {approval_id}")
    return found


def decide(store: Store, approval_id: str, *, approve: bool, by: str, note: str | None, principal: str) -> Approval:
    """Approve or deny; journaled as `approval_granted` / `approval_denied` with who (`by`: who the
    decider says acted, as the event's actor; `principal`: who they are authenticated as, in its data)
    and the note.

    Raises:
        NotFound: no such approval.
        BadInput: a denial without a note, or an `approval_id` that does not have the form of one.
        Conflict: deciding again on an approval that was already used.

    Approving an approved request, or denying a denied one, changes nothing.
    """
    if not approve and not (note and note.strip()):
        raise BadInput("a note is required to deny an approval: say why")
    check_id("approval", approval_id)
    with store.write() as q:
        found = q.get_approval(approval_id)
        if found is None:
            raise NotFound(f"no approval {approval_id}")
        q.lock_run(found.run_id)
        current = q.get_approval(approval_id)  # again, under the lock: a call may have used it meanwhile
        assert current is not None
        if current.status is ApprovalStatus.APPROVED and current.used:
            raise Conflict(f"approval {approval_id} was approved and already used; it cannot be decided again")
        if current.status is (ApprovalStatus.APPROVED if approve else ApprovalStatus.DENIED):
            return current  # deciding the same way twice changes nothing (the first note stands)
        event = EventType.APPROVAL_GRANTED if approve else EventType.APPROVAL_DENIED
        data = {"approval_id": approval_id, "note": note, "principal": principal}
        q.append(current.run_id, [NewEvent(event, current.step, by, data)])
        decided = q.get_approval(approval_id)
    assert decided is not None
    return decided


def compensation_approval(
    q: Queries, run_id: str, step: int, tool: str, args: JSONView, *, requested_by: str, approve_pending: bool,
    actor: str, principal: str | None = None,
) -> Approval:
    """The approval a step's compensation needs: created once, reused by re-runs.

    An approval is for the call it names: if the compensation to run is another tool or other
    arguments (the manifest changed since), a new approval is requested for it. With
    `approve_pending`, a pending request is granted here as one operator decision by `actor`; a
    denial is never overridden. `principal`, who the rollback runs as, is journaled with both.
    """
    acting = {"principal": principal} if principal is not None else {}
    call_key = str(step)
    found = q.approvals_for_call(run_id, ApprovalKind.COMPENSATION, call_key)
    if found and (found[-1].tool, found[-1].args) == (tool, args):
        approval = found[-1]
    else:
        approval_id = new_approval_id()
        q.insert_approval(
            ApprovalRow(
                approval_id, run_id, step, ApprovalKind.COMPENSATION, tool, args, call_key, requested_by, utc_now()
            )
        )
        q.append(
            run_id,
            [
                NewEvent(
                    EventType.APPROVAL_REQUESTED,
                    step,
                    requested_by,
                    {"approval_id": approval_id, "kind": "compensation", "tool": tool, "args": args} | acting,
                )
            ],
        )
        approval = q.get_approval(approval_id)  # type: ignore[assignment]
    if approve_pending and approval.status is ApprovalStatus.PENDING:
        q.append(
            run_id,
            [
                NewEvent(
                    EventType.APPROVAL_GRANTED,
                    step,
                    actor,
                    {"approval_id": approval.approval_id, "note": APPROVE_ALL_NOTE} | acting,
                )
            ],
        )
        approval = q.get_approval(approval.approval_id)  # type: ignore[assignment]
    return approval
