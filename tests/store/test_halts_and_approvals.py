"""Halts and approvals, whose state the store derives from its journal."""

from __future__ import annotations

import pytest

import reversi
from reversi.errors import ApprovalDenied, ApprovalRequired, BadInput, Conflict, NotFound


def wire(run: reversi.Run, amount: int = 900) -> str:
    """Ask for a forward approval; returns its id."""
    with pytest.raises(ApprovalRequired) as asked:
        run.begin("payments.wire", {"amount": amount})
    return asked.value.approval_id


def test_active_halts_follow_each_add_and_lift(ledger: reversi.Ledger) -> None:
    assert ledger.halts() == []
    first = ledger.add_halt("first", tool="stripe.*", by="dana")
    second = ledger.add_halt("second", tenant="acme", environment="prod", by="lee")
    third = ledger.add_halt("third", by="dana")

    assert [h.halt_id for h in ledger.halts()] == [first.halt_id, second.halt_id, third.halt_id]
    assert ledger.halts()[1].to_dict()["scope"] == {"tenant": "acme", "environment": "prod"}
    assert ledger.halts()[1].by == "lee"

    assert ledger.lift_halts(second.halt_id, by="dana") == 1
    assert [h.halt_id for h in ledger.halts()] == [first.halt_id, third.halt_id]
    with pytest.raises(NotFound):
        ledger.lift_halts(second.halt_id)
    with pytest.raises(NotFound):
        ledger.lift_halts("halt_00000000-0000-0000-0000-000000000000")

    assert ledger.lift_halts(by="dana") == 2
    assert ledger.halts() == []
    assert ledger.lift_halts() == 0


def test_halts_are_journaled_in_a_stream_of_their_own(ledger: reversi.Ledger) -> None:
    halt = ledger.add_halt("frozen", actor="billing-*", by="dana")
    ledger.lift_halts(halt.halt_id, by="lee")

    with ledger.store.read() as q:
        events = q.system_events()

    assert [(e.type, e.actor, e.data["halt_id"]) for e in events] == [
        ("halt_added", "dana", halt.halt_id),
        ("halt_lifted", "lee", halt.halt_id),
    ]
    assert [e.seq for e in events] == [0, 1]
    assert events[0].data["reason"] == "frozen" and events[0].data["scope"] == {"actor": "billing-*"}


def test_a_halt_needs_a_reason(ledger: reversi.Ledger) -> None:
    for reason in ["", "   "]:
        with pytest.raises(BadInput):
            ledger.add_halt(reason)
    assert ledger.halts() == []


def test_an_approval_goes_from_pending_to_approved_to_used(ledger: reversi.Ledger) -> None:
    run = ledger.start_run(actor="billing-agent")
    approval_id = wire(run)

    [pending] = ledger.approvals(status="pending")
    assert (pending.approval_id, pending.kind.value, pending.tool, pending.args) == (
        approval_id,
        "call",
        "payments.wire",
        {"amount": 900},
    )
    assert pending.requested_by == "billing-agent" and pending.step is None
    assert (pending.decided_by, pending.decided_at, pending.note, pending.used) == (None, None, None, False)

    approved = ledger.approve(approval_id, by="dana", note="ok for today")
    assert (approved.status.value, approved.decided_by, approved.note, approved.used) == (
        "approved",
        "dana",
        "ok for today",
        False,
    )
    assert approved.decided_at is not None and approved.decided_at >= approved.requested_at
    assert ledger.approvals(status="pending") == []

    run.begin("payments.wire", {"amount": 900}).succeeded({"id": "w_1"})
    [used] = ledger.approvals(run_id=run.id)
    assert used.status.value == "approved" and used.used is True
    with pytest.raises(Conflict, match="already used"):
        ledger.deny(approval_id, note="too late", by="lee")


def test_an_approved_but_unused_approval_can_still_be_denied(ledger: reversi.Ledger) -> None:
    run = ledger.start_run()
    approval_id = wire(run)
    ledger.approve(approval_id, by="dana")

    denied = ledger.deny(approval_id, note="changed my mind", by="dana")

    assert denied.status.value == "denied" and denied.note == "changed my mind"
    with pytest.raises(ApprovalDenied, match="approval denied: changed my mind"):
        run.begin("payments.wire", {"amount": 900})


def test_a_denied_approval_can_later_be_approved(ledger: reversi.Ledger) -> None:
    run = ledger.start_run()
    approval_id = wire(run)
    ledger.deny(approval_id, note="over the limit", by="dana")
    with pytest.raises(ApprovalDenied):
        run.begin("payments.wire", {"amount": 900})

    again = ledger.approve(approval_id, by="lee", note="limit raised")

    assert (again.status.value, again.decided_by, again.note) == ("approved", "lee", "limit raised")
    assert run.begin("payments.wire", {"amount": 900}).index == 0
    types = [e.type for e in run.events() if e.data.get("approval_id") == approval_id]
    assert types == ["approval_requested", "approval_denied", "approval_granted", "intended"]


def test_deciding_is_journaled_with_who_and_the_note(ledger: reversi.Ledger) -> None:
    run = ledger.start_run()
    approval_id = wire(run)
    ledger.approve(approval_id, by="dana", note="fine")

    [granted] = [e for e in run.events() if e.type == "approval_granted"]

    assert granted.actor == "dana"
    assert granted.data == {"approval_id": approval_id, "note": "fine", "principal": "local"}


def test_a_denial_needs_a_note_and_an_unknown_approval_is_not_found(ledger: reversi.Ledger) -> None:
    run = ledger.start_run()
    approval_id = wire(run)

    for note in ["", "  "]:
        with pytest.raises(BadInput, match="note"):
            ledger.deny(approval_id, note=note)
    with pytest.raises(NotFound):
        ledger.approve("apr_" + "0" * 32)
    assert [a.status.value for a in ledger.approvals()] == ["pending"]


def test_approvals_are_listed_pending_first_then_oldest_first(ledger: reversi.Ledger) -> None:
    run = ledger.start_run()
    first, second, third = (wire(run, amount) for amount in (1, 2, 3))
    ledger.approve(first)

    assert [a.approval_id for a in ledger.approvals()] == [second, third, first]
    assert [a.approval_id for a in ledger.approvals(status="approved")] == [first]
    with pytest.raises(BadInput):
        ledger.approvals(status="maybe")
