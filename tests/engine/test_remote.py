"""Remote workers and the rollback lock: claims, leases, and who may undo a step while others do."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import pytest

import reversi
from reversi.core.plan import compensation_key
from reversi.errors import BadInput, NotCompensable, NotFound, RollbackInProgress

Spawn = Callable[..., Any]


class Undo:
    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def __call__(self, call: dict[str, Any]) -> Any:
        self.calls.append(call)
        return {"ok": True}


def charge(run: reversi.Run, amount: int = 7) -> int:
    handle = run.begin("stripe.create_charge", {"amount": amount})
    handle.succeeded({"id": f"ch_{amount}"})
    return handle.index


def types(run: reversi.Run, step: int) -> list[str]:
    return [e.type for e in run.events() if e.step == step]


def test_a_claim_journals_compensating_with_its_worker_key_and_expiry(ledger: reversi.Ledger) -> None:
    run = ledger.start_run()
    charge(run)

    work = run.begin_compensation(0, lease_s=60, worker="worker-7")

    key = compensation_key(run.id, 0, "stripe.refund")
    assert work.call == {
        "run_id": run.id,
        "step": 0,
        "tool": "stripe.refund",
        "original_tool": "stripe.create_charge",
        "args": {"charge_id": "ch_7", "amount": 7},
        "idempotency_key": key,
    }
    [claim] = [e for e in run.events() if e.type == "compensating"]
    assert claim.actor == "worker-7"
    assert claim.data["claim_until"] == work.claim_until and claim.data["idempotency_key"] == key
    assert claim.data["attempt"] == 1
    assert run.steps()[0].status.value == "compensating"


@pytest.mark.parametrize(
    ("verified", "tool", "expected"),
    [
        (True, "stripe.create_payment_intent", ["compensating", "verified", "compensated"]),
        (None, "stripe.create_payment_intent", ["compensating", "unverified", "compensated"]),
        (None, "stripe.create_charge", ["compensating", "compensated"]),
        (False, "stripe.create_payment_intent", ["compensating", "verification_failed", "compensation_failed"]),
    ],
)
def test_completing_a_claim_journals_how_it_went(
    ledger: reversi.Ledger, verified: bool | None, tool: str, expected: list[str]
) -> None:
    run = ledger.start_run()
    run.begin(tool, {"amount": 7}).succeeded({"id": "x_7"})
    work = run.begin_compensation(0)

    status = run.complete_compensation(work, ok=True, result={"refund": "re_1"}, verified=verified)

    assert types(run, 0)[2:] == expected
    assert status.value == expected[-1] == run.steps()[0].status.value


def test_a_failed_remote_compensation_is_retried_by_a_rollback_with_the_same_key(ledger: reversi.Ledger) -> None:
    run = ledger.start_run()
    charge(run)
    work = run.begin_compensation(0)
    run.complete_compensation(work, ok=False, error="refund API down")
    assert run.steps()[0].last_error == "refund API down"
    undo = Undo()

    report = run.rollback(compensate=undo)

    assert report.compensated == [0]
    assert [c["idempotency_key"] for c in undo.calls] == [work.call["idempotency_key"]]


def test_a_live_claim_keeps_a_rollback_off_the_step_and_its_dependencies(ledger: reversi.Ledger) -> None:
    run = ledger.start_run()
    run.begin("github.create_repo", {"name": "x"}).succeeded({"full_name": "acme/x"})  # 0
    charge(run)  # 1
    run.begin("jobs.start", {"n": 1}, depends_on=[0]).succeeded({"id": "job_1"})  # 2 depends on 0
    work = run.begin_compensation(2, lease_s=300, worker="worker-7")
    undo = Undo()

    report = run.rollback(compensate=undo)

    assert [f.to_dict() for f in report.failed] == [
        {"step": 2, "error": f"claimed by a remote worker until {work.claim_until}", "attempts": 0}
    ]
    assert [d.to_dict() for d in report.deferred] == [{"step": 0, "blocked_by": [2]}]
    assert report.compensated == [1] and [c["step"] for c in undo.calls] == [1]
    assert run.complete_compensation(work, ok=True).value == "compensated", "the worker can still finish"
    assert run.rollback(compensate=undo).compensated == [0]


def test_an_expired_claim_is_retried_by_a_rollback_with_the_same_key(ledger: reversi.Ledger) -> None:
    run = ledger.start_run()
    charge(run)
    work = run.begin_compensation(0, lease_s=1e-6)  # expired by the time anyone looks
    undo = Undo()

    report = run.rollback(compensate=undo)

    assert report.compensated == [0]
    assert [c["idempotency_key"] for c in undo.calls] == [work.call["idempotency_key"]]
    with pytest.raises(NotCompensable, match="not being compensated"):
        run.complete_compensation(work, ok=True)
    assert types(run, 0).count("compensated") == 1


def test_an_expired_claim_can_be_taken_by_another_worker(ledger: reversi.Ledger) -> None:
    run = ledger.start_run()
    charge(run)
    first = run.begin_compensation(0, lease_s=1e-6, worker="slow")

    second = run.begin_compensation(0, lease_s=60, worker="fast")

    assert second.call == first.call
    claims = [e.data for e in run.events() if e.type == "compensating"]
    assert [(c["worker"], c["attempt"]) for c in claims] == [("slow", 1), ("fast", 2)]
    with pytest.raises(NotCompensable, match="is no longer under this claim: it is under fast's claim until"):
        run.complete_compensation(first, ok=True)  # the slow worker, late: the step is fast's now
    assert run.complete_compensation(second, ok=True).value == "compensated"
    assert types(run, 0).count("compensated") == 1


def test_an_expired_claim_nobody_took_over_may_still_report(ledger: reversi.Ledger) -> None:
    """The undo was made: refusing its report would only get it made again."""
    run = ledger.start_run()
    charge(run)
    late = run.begin_compensation(0, lease_s=1e-6, worker="slow")
    assert run.complete_compensation(late, ok=True).value == "compensated"


def test_a_forged_or_stale_handle_cannot_complete_anothers_claim(ledger: reversi.Ledger) -> None:
    run = ledger.start_run()
    charge(run)
    live = run.begin_compensation(0, lease_s=60, worker="w1")
    forged = dataclasses.replace(live, claim_until="2020-01-01T00:00:00.000000Z", worker="mallory")
    with pytest.raises(NotCompensable, match="no longer under this claim"):
        run.complete_compensation(forged, ok=True)
    assert types(run, 0) == ["intended", "succeeded", "compensating"]


def test_a_live_claim_cannot_be_claimed_again(ledger: reversi.Ledger) -> None:
    run = ledger.start_run()
    charge(run)
    work = run.begin_compensation(0, lease_s=300)

    with pytest.raises(NotCompensable, match=f"claimed by a remote worker until {work.claim_until}"):
        run.begin_compensation(0)


REFUSED_STEPS = [
    ("stripe.get_charge", "succeeded", "skip"),
    ("crm.upsert_contact", "succeeded", "skip"),
    ("stripe.create_charge", "failed", "skip"),
    ("stripe.create_charge", "uncertain", "unresolved"),
    ("stripe.create_charge", "intended", "unresolved"),
    ("email.send", "succeeded", "unrecoverable"),
    ("weather.set", "succeeded", "unmanifested"),
]


@pytest.mark.parametrize(("tool", "status", "kind"), REFUSED_STEPS)
def test_a_step_that_is_not_a_standing_undoable_step_cannot_be_claimed(
    ledger: reversi.Ledger, tool: str, status: str, kind: str
) -> None:
    run = ledger.start_run()
    handle = run.begin(tool, {"amount": 1})
    if status != "intended":
        getattr(handle, status)({"id": "ch_1"} if status == "succeeded" else "boom")
    before = run.events()

    with pytest.raises(NotCompensable, match=f"cannot be claimed: {kind}"):
        run.begin_compensation(0)

    assert run.events() == before


def test_a_compensated_step_cannot_be_claimed(ledger: reversi.Ledger) -> None:
    run = ledger.start_run()
    charge(run)
    run.rollback(compensate=Undo())

    with pytest.raises(NotCompensable, match="already compensated"):
        run.begin_compensation(0)


def test_a_step_with_a_standing_dependent_cannot_be_claimed(ledger: reversi.Ledger) -> None:
    run = ledger.start_run()
    run.begin("github.create_repo", {"name": "x"}).succeeded({"full_name": "acme/x"})
    run.begin("github.create_file", {"repo": "acme/x", "path": "a"}).succeeded({})

    with pytest.raises(NotCompensable, match="still has a standing dependent: step 1"):
        run.begin_compensation(0)
    work = run.begin_compensation(1)
    with pytest.raises(NotCompensable, match="standing dependent"):
        run.begin_compensation(0)  # step 1 is being undone, but it still stands
    run.complete_compensation(work, ok=True)
    assert run.begin_compensation(0).call["args"] == {"repo": "acme/x"}


def test_a_read_or_idempotent_dependent_never_holds_a_claim_back(ledger: reversi.Ledger) -> None:
    """As in the plan: a step that needs no undo does not stand in the way of what it depends on."""
    run = ledger.start_run()
    charged = charge(run)
    run.begin("stripe.get_charge", {"id": "ch_1"}, depends_on=[charged]).succeeded({"paid": True})
    run.begin("crm.upsert_contact", {"email": "a@b.c"}, depends_on=[charged]).succeeded({})
    assert [a.kind.value for a in run.plan().actions] == ["skip", "skip", "compensate"]
    assert run.begin_compensation(charged).index == charged


def test_a_step_whose_compensation_needs_approval_can_be_claimed_once_approved(ledger: reversi.Ledger) -> None:
    run = ledger.start_run()
    run.begin("bank.transfer", {"amount": 5}).succeeded({"id": "tr_1"})

    with pytest.raises(NotCompensable, match="waits for an approval"):
        run.begin_compensation(0)
    [waiting] = run.rollback(compensate=Undo()).awaiting_approval
    with pytest.raises(NotCompensable, match=f"waits for an approval \\({waiting.approval_id}\\)"):
        run.begin_compensation(0)
    ledger.approve(waiting.approval_id, by="dana")

    run.begin_compensation(0)
    [claim] = [e for e in run.events() if e.type == "compensating"]
    assert claim.data["approval_id"] == waiting.approval_id
    assert ledger.approvals()[0].used


def test_claiming_an_unknown_step_is_not_found_and_a_bad_lease_is_bad_input(ledger: reversi.Ledger) -> None:
    run = ledger.start_run()
    charge(run)

    with pytest.raises(NotFound):
        run.begin_compensation(3)
    with pytest.raises(BadInput):
        run.begin_compensation(0, lease_s=0)


def test_a_step_held_by_a_running_rollback_cannot_be_claimed(ledger: reversi.Ledger, spawn: Spawn) -> None:
    run = ledger.start_run()
    charge(run)
    holder = spawn("hold-lock", run_id=run.id)
    holder.expect("locked")

    with pytest.raises(NotCompensable, match="claimed by a running rollback"):
        run.begin_compensation(0)

    holder.send("release")
    holder.expect("released")
    assert run.begin_compensation(0).index == 0


def test_a_rollback_is_refused_while_another_process_holds_the_run_and_starts_the_moment_it_dies(
    ledger: reversi.Ledger, spawn: Spawn
) -> None:
    run = ledger.start_run()
    charge(run)
    holder = spawn("hold-lock", run_id=run.id)
    holder.expect("locked")
    before = run.events()
    undo = Undo()

    with pytest.raises(RollbackInProgress, match=f"^rollback already in progress for {run.id}$"):
        run.rollback(compensate=undo)
    assert undo.calls == [] and run.events() == before

    holder.kill()
    assert run.rollback(compensate=undo).compensated == [0], "a dead holder releases the run at once"


def test_a_second_rollback_in_the_same_process_is_refused_too(ledger: reversi.Ledger) -> None:
    run = ledger.start_run()
    charge(run)
    other = ledger.start_run()
    charge(other)

    with ledger.store.lock_run(run.id):
        with pytest.raises(RollbackInProgress):
            run.rollback(compensate=Undo())
        assert other.rollback(compensate=Undo()).compensated == [0], "the lock is per run"

    assert run.rollback(compensate=Undo()).compensated == [0]


def test_a_rollback_that_raises_releases_the_run(ledger: reversi.Ledger) -> None:
    run = ledger.start_run()
    charge(run)

    def crash(call: dict[str, Any]) -> Any:
        raise KeyboardInterrupt  # not an Exception: the executor does not catch it

    with pytest.raises(KeyboardInterrupt):
        run.rollback(compensate=crash)
    assert run.steps()[0].status.value == "compensating"

    undo = Undo()
    assert run.rollback(compensate=undo).compensated == [0]
    assert undo.calls[0]["idempotency_key"] == compensation_key(run.id, 0, "stripe.refund")
