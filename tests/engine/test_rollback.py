"""The rollback executor: retries with one key, backoff, checks, read-backs, approvals, run-time deferral."""

from __future__ import annotations

import asyncio
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import reversi
from reversi.core.plan import compensation_key
from reversi.engine.approvals import APPROVE_ALL_NOTE
from reversi.engine.commands import command_compensator
from reversi.engine.rollback import CANNOT_VERIFY, NOT_VERIFIED, VERIFICATION_FAILED, RollbackExecutor, RollbackOptions
from reversi.errors import BadInput, ConfigError, Conflict

COMPENSATOR = Path(__file__).with_name("compensator.py")


class Undo:
    """A compensator that remembers every call; it fails the first `fail_first` calls of each key."""

    def __init__(self, fail_first: int = 0, fail_tools: tuple[str, ...] = ()) -> None:
        self.calls: list[dict[str, Any]] = []
        self.fail_first = fail_first
        self.fail_tools = fail_tools

    def __call__(self, call: dict[str, Any]) -> Any:
        self.calls.append(call)
        seen = sum(c["idempotency_key"] == call["idempotency_key"] for c in self.calls)
        if seen <= self.fail_first or call["tool"] in self.fail_tools:
            raise ConnectionError("downstream said 503")
        return {"undone": call["tool"], "attempt": call["attempt"]}

    @property
    def steps(self) -> list[int]:
        return [c["step"] for c in self.calls]


class Reader:
    """A read-back that gives the answers in turn (the last one forever); an exception is raised."""

    def __init__(self, *answers: Any) -> None:
        self.answers = list(answers)
        self.calls: list[tuple[str, Any]] = []

    def __call__(self, tool: str, arguments: Any) -> Any:
        self.calls.append((tool, arguments))
        answer = self.answers[min(len(self.calls), len(self.answers)) - 1]
        if isinstance(answer, Exception):
            raise answer
        return answer


def step_events(run: reversi.Run, step: int) -> list[tuple[str, dict[str, Any]]]:
    return [(e.type, dict(e.data)) for e in run.events() if e.step == step]


def charge(run: reversi.Run, amount: int = 700) -> int:
    handle = run.begin("stripe.create_charge", {"amount": amount})
    handle.succeeded({"id": f"ch_{amount}"})
    return handle.index


def executor(
    ledger: reversi.Ledger, undo: Any, retry: reversi.Retry, **kw: Any
) -> tuple[RollbackExecutor, list[float]]:
    """An executor whose sleeps are recorded instead of slept."""
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    options = RollbackOptions(compensate=undo, retry=retry, **kw)
    return RollbackExecutor(ledger.store, ledger.manifests, options, sleep=sleep), slept


def execute(ledger: reversi.Ledger, run: reversi.Run, rollback: RollbackExecutor) -> reversi.RollbackReport:
    with ledger.store.lock_run(run.id):
        return asyncio.run(rollback.execute(run.id))


def test_a_failing_compensation_is_retried_with_one_key_and_each_attempt_is_journaled(ledger: reversi.Ledger) -> None:
    run = ledger.start_run()
    charge(run)
    undo = Undo(fail_first=2)

    report = run.rollback(compensate=undo, retry=reversi.Retry(attempts=4, base_ms=0, max_ms=0))

    assert report.compensated == [0] and report.complete
    assert [c["attempt"] for c in undo.calls] == [1, 2, 3]
    assert {c["idempotency_key"] for c in undo.calls} == {compensation_key(run.id, 0, "stripe.refund")}
    events = step_events(run, 0)[2:]  # after intended, succeeded
    assert [(t, d.get("attempt"), d.get("attempts")) for t, d in events] == [
        ("compensating", 1, None),
        ("compensation_failed", 1, None),
        ("compensating", 2, None),
        ("compensation_failed", 2, None),
        ("compensating", 3, None),
        ("compensated", None, 3),
    ]
    assert all(d["idempotency_key"] == undo.calls[0]["idempotency_key"] for t, d in events if t == "compensating")
    assert events[1][1]["error"] == "downstream said 503"
    assert all("retry_at" in d for t, d in events if t == "compensation_failed")  # another attempt followed each
    assert events[-1][1]["result"] == {"undone": "stripe.refund", "attempt": 3}
    assert "(3 attempts)" in report.to_text()


def test_a_compensation_that_keeps_failing_is_reported_and_a_rerun_uses_the_same_key(ledger: reversi.Ledger) -> None:
    run = ledger.start_run()
    charge(run)
    failing = Undo(fail_tools=("stripe.refund",))

    report = run.rollback(compensate=failing, retry=reversi.Retry(attempts=3, base_ms=0, max_ms=0))

    assert [f.to_dict() for f in report.failed] == [{"step": 0, "error": "downstream said 503", "attempts": 3}]
    assert report.compensated == [] and not report.complete
    [state] = run.steps()
    assert state.status.value == "compensation_failed" and state.last_error == "downstream said 503"
    assert run.plan().actions[0].kind.value == "compensate", "it still stands, so it is still to undo"

    working = Undo()
    again = run.rollback(compensate=working)
    assert again.compensated == [0] and again.complete
    assert working.calls[0]["idempotency_key"] == failing.calls[0]["idempotency_key"]


def test_the_delay_before_each_attempt_backs_off_exponentially_with_jitter(ledger: reversi.Ledger) -> None:
    run = ledger.start_run()
    charge(run)
    retry = reversi.Retry(attempts=6, base_ms=100, max_ms=500)
    rollback, slept = executor(ledger, Undo(fail_tools=("stripe.refund",)), retry)

    report = execute(ledger, run, rollback)

    assert report.failed[0].attempts == 6
    bounds = [min(500, 100 * 2 ** (k - 2)) / 1000 for k in range(2, 7)]
    assert len(slept) == len(bounds) == 5
    for delay, bound in zip(slept, bounds, strict=True):
        assert 0.5 * bound <= delay <= bound, (slept, bounds)


@given(
    attempt=st.integers(2, 10),
    base_ms=st.integers(0, 5_000),
    max_ms=st.integers(0, 20_000),
    jitter=st.floats(0.5, 1.0),
)
def test_the_backoff_delay_is_the_documented_formula(attempt: int, base_ms: int, max_ms: int, jitter: float) -> None:
    retry = reversi.Retry(attempts=10, base_ms=base_ms, max_ms=max_ms)
    expected = min(max_ms, base_ms * 2 ** (attempt - 2)) * jitter / 1000

    assert retry.delay_s(attempt, jitter) == pytest.approx(expected)
    assert retry.delay_s(1, jitter) == 0


@pytest.mark.parametrize(
    "kwargs",
    [{"attempts": 0}, {"attempts": 11}, {"attempts": True}, {"attempts": 2.0}, {"base_ms": -1}, {"max_ms": 1.5}],
)
def test_a_retry_policy_out_of_range_is_bad_input(kwargs: dict[str, Any]) -> None:
    with pytest.raises(BadInput):
        reversi.Retry(**kwargs)


def test_a_failed_verify_check_fails_the_attempt_and_the_next_runs_both_again(ledger: reversi.Ledger) -> None:
    run = ledger.start_run()
    charge(run)
    undo = Undo()
    checks: list[dict[str, Any]] = []

    def verify(call: dict[str, Any]) -> bool:
        checks.append(call)
        return len(checks) > 1

    report = run.rollback(compensate=undo, verify=verify, retry=reversi.Retry(attempts=2, base_ms=0))

    assert report.compensated == [0]
    assert [c["attempt"] for c in undo.calls] == [1, 2] and [c["attempt"] for c in checks] == [1, 2]
    assert checks[0]["idempotency_key"] == undo.calls[0]["idempotency_key"]
    [failed] = [d for t, d in step_events(run, 0) if t == "compensation_failed"]
    assert failed["error"] == "the verify check did not confirm the undo"


def payment_intent(run: reversi.Run) -> None:
    run.begin("stripe.create_payment_intent", {"amount": 5}).succeeded({"id": "pi_1", "status": "succeeded"})


def test_a_read_back_that_matches_journals_verified_before_compensated(ledger: reversi.Ledger) -> None:
    run = ledger.start_run()
    payment_intent(run)
    reader = Reader({"id": "pi_1", "status": "canceled", "extra": [1]})

    report = run.rollback(compensate=Undo(), verifier=reader)

    assert report.compensated == [0] and report.unverified == [] and report.complete
    assert reader.calls == [("stripe.get_payment_intent", {"id": "pi_1"})]
    types = [t for t, _ in step_events(run, 0)]
    assert types[-3:] == ["compensating", "verified", "compensated"]
    [verified] = [d for t, d in step_events(run, 0) if t == "verified"]
    assert verified["answer"] == {"id": "pi_1", "status": "canceled", "extra": [1]}


def test_a_read_back_is_retried_with_doubling_waits_until_it_matches(ledger: reversi.Ledger) -> None:
    run = ledger.start_run()
    payment_intent(run)
    reader = Reader({"status": "processing"}, RuntimeError("reader crashed"), {"status": "canceled"})
    rollback, slept = executor(ledger, Undo(), reversi.Retry(), read_back=reader)

    report = execute(ledger, run, rollback)

    assert report.compensated == [0]
    assert len(reader.calls) == 3
    assert slept == [0.01, 0.02], "backoff_ms: 10, doubling"


def test_a_read_back_that_never_matches_fails_the_step_with_the_first_mismatch(ledger: reversi.Ledger) -> None:
    run = ledger.start_run()
    payment_intent(run)
    reader = Reader({"id": "pi_1", "status": "succeeded"})
    undo = Undo()

    report = run.rollback(compensate=undo, verifier=reader)

    mismatch = '`status` is "succeeded", expected "canceled"'
    [failure] = report.failed
    assert failure.error == f"{VERIFICATION_FAILED}: {mismatch}" and failure.attempts == 1
    assert len(reader.calls) == 3, "retries: 2 means 1 + 2 read-backs"
    events = step_events(run, 0)
    assert [t for t, _ in events][-3:] == ["compensating", "verification_failed", "compensation_failed"]
    assert events[-2][1]["mismatch"] == mismatch and events[-2][1]["reads"] == 3
    assert run.steps()[0].status.value == "compensation_failed"

    again = run.rollback(compensate=undo, verifier=Reader({"status": "canceled"}))
    assert again.compensated == [0]
    assert [c["idempotency_key"] for c in undo.calls] == [undo.calls[0]["idempotency_key"]] * 2, (
        "a re-run after a failed read-back runs the compensation again with the same key"
    )


def test_a_reader_that_errors_every_time_fails_the_step(ledger: reversi.Ledger) -> None:
    run = ledger.start_run()
    payment_intent(run)

    report = run.rollback(compensate=Undo(), verifier=Reader(OSError("reader exited 1")))

    [failure] = report.failed
    assert failure.error == f"{VERIFICATION_FAILED}: read failed: reader exited 1"


def test_a_read_back_whose_arguments_are_unavailable_fails_without_reading(ledger: reversi.Ledger) -> None:
    run = ledger.start_run()
    run.begin("docs.create", {"name": "plan.md"}).succeeded({"url": "https://docs/plan.md"})  # no doc_id
    reader = Reader({"deleted": True})
    undo = Undo()

    report = run.rollback(compensate=undo, verifier=reader)

    assert [f.error for f in report.failed] == [CANNOT_VERIFY] == ["cannot verify: arguments unavailable"]
    assert reader.calls == [] and len(undo.calls) == 1
    [failed_check] = [d for t, d in step_events(run, 0) if t == "verification_failed"]
    assert failed_check == {"error": CANNOT_VERIFY, "missing": "$result.doc_id", "principal": "local"}
    assert run.steps()[0].status.value == "compensation_failed"


def test_an_undo_without_a_verifier_is_unverified_and_a_rerun_reports_complete(ledger: reversi.Ledger) -> None:
    run = ledger.start_run()
    payment_intent(run)
    undo = Undo()

    first = run.rollback(compensate=undo)

    assert first.compensated == [0] and first.unverified == [0] and not first.complete
    assert [t for t, _ in step_events(run, 0)][-3:] == ["compensating", "unverified", "compensated"]
    assert step_events(run, 0)[-2][1] == {"reason": NOT_VERIFIED, "principal": "local"}
    assert "undone but not verified" in first.to_text() and first.to_text().endswith("rollback INCOMPLETE")

    second = run.rollback(compensate=undo)
    assert second.skipped == [0] and second.complete and len(undo.calls) == 1


def test_a_compensators_json_answer_is_journaled_and_its_last_stderr_line_is_the_error(
    ledger: reversi.Ledger, tmp_path: Path
) -> None:
    run = ledger.start_run()
    charge(run, 1)
    charge(run, 2)
    state = tmp_path / "downstream"
    state.mkdir()
    cmd = f"{shlex.quote(sys.executable)} {shlex.quote(str(COMPENSATOR))} {shlex.quote(str(state))} --fail-first 1"

    report = run.rollback(compensate=command_compensator(cmd), retry=reversi.Retry(attempts=2, base_ms=0))

    assert report.compensated == [1, 0]
    key = compensation_key(run.id, 1, "stripe.refund")
    failed = [d for t, d in step_events(run, 1) if t == "compensation_failed"]
    assert [d["error"] for d in failed] == ["downstream said 503 (call 1)"]
    assert step_events(run, 1)[-1][1]["result"] == {"undone": "stripe.refund", "key": key[:12]}


def test_a_rollback_with_something_to_undo_and_no_compensator_changes_nothing(ledger: reversi.Ledger) -> None:
    run = ledger.start_run()
    charge(run)
    before = run.events()

    with pytest.raises(ConfigError, match="no compensator"):
        run.rollback()

    assert run.events() == before
    nothing_to_undo = ledger.start_run()
    nothing_to_undo.begin("stripe.get_charge", {"id": "ch_1"}).succeeded({})
    assert nothing_to_undo.rollback().complete


def test_progress_is_reported_once_per_step(ledger: reversi.Ledger) -> None:
    run = ledger.start_run()
    for amount in range(3):
        charge(run, amount)
    seen: list[tuple[int, int]] = []

    run.rollback(compensate=Undo(), progress=lambda done, total: seen.append((done, total)))

    assert seen == [(1, 3), (2, 3), (3, 3)]


def transfer(run: reversi.Run, depends_on: tuple[int, ...] = ()) -> int:
    handle = run.begin("bank.transfer", {"amount": 5}, depends_on=list(depends_on))
    handle.succeeded({"id": "tr_1"})
    return handle.index


def test_a_compensation_approval_is_requested_once_and_reused_by_reruns(ledger: reversi.Ledger) -> None:
    run = ledger.start_run()
    transfer(run)
    undo = Undo()

    first = run.rollback(compensate=undo, actor="dana")
    second = run.rollback(compensate=undo, actor="lee")

    assert undo.calls == []
    [waiting] = first.awaiting_approval
    assert waiting.to_dict() == {"step": 0, "approval_id": waiting.approval_id, "status": "pending"}
    assert [a.to_dict() for a in second.awaiting_approval] == [waiting.to_dict()]
    [approval] = ledger.approvals()
    assert approval.approval_id == waiting.approval_id
    assert (approval.kind.value, approval.step, approval.tool, approval.args, approval.requested_by) == (
        "compensation",
        0,
        "bank.reverse_transfer",
        {"transfer": "tr_1"},
        "dana",
    )
    assert [t for t, _ in step_events(run, 0)].count("approval_requested") == 1

    ledger.approve(approval.approval_id, by="dana")
    third = run.rollback(compensate=undo)
    assert third.compensated == [0] and third.complete
    [compensating] = [d for t, d in step_events(run, 0) if t == "compensating"]
    assert compensating["approval_id"] == approval.approval_id
    assert ledger.approvals()[0].used
    with pytest.raises(Conflict):
        ledger.deny(approval.approval_id, note="too late")


def test_denying_a_denied_approval_changes_nothing(ledger: reversi.Ledger) -> None:
    run = ledger.start_run()
    transfer(run)
    [waiting] = run.rollback(compensate=Undo()).awaiting_approval
    first = ledger.deny(waiting.approval_id, note="not today", by="dana")
    again = ledger.deny(waiting.approval_id, note="still no", by="lee")
    assert (again.note, again.decided_by) == (first.note, first.decided_by) == ("not today", "dana")
    assert [t for t, _ in step_events(run, 0)].count("approval_denied") == 1


def test_an_approval_is_for_the_call_it_names_a_changed_compensation_asks_again(
    db_url: str, manifest: Path, tmp_path: Path
) -> None:
    """Approving `bank.reverse_transfer {transfer: tr_1}` does not let a later manifest run another
    tool, or other arguments, under that approval: the changed call waits for an approval of its own."""
    changed = tmp_path / "changed.yaml"
    changed.write_text(manifest.read_text().replace("tool: bank.reverse_transfer", "tool: bank.claw_back"))
    assert changed.read_text() != manifest.read_text()
    with reversi.open(db_url, manifests=[str(manifest)]) as ledger:
        run = ledger.start_run()
        transfer(run)
        [asked] = run.rollback(compensate=Undo()).awaiting_approval
        ledger.approve(asked.approval_id, by="dana")
    with reversi.open(db_url, manifests=[str(changed)]) as ledger:
        undo = Undo()
        report = ledger.get_run(run.id).rollback(compensate=undo)
        assert undo.calls == [] and not report.complete
        [waiting] = report.awaiting_approval
        assert waiting.approval_id != asked.approval_id and waiting.status == "pending"
        [fresh] = [a for a in ledger.approvals() if a.approval_id == waiting.approval_id]
        assert (fresh.tool, fresh.args) == ("bank.claw_back", {"transfer": "tr_1"})
        ledger.approve(waiting.approval_id, by="dana")
        assert ledger.get_run(run.id).rollback(compensate=undo).complete
        assert [c["tool"] for c in undo.calls] == ["bank.claw_back"]
        [compensating] = [d for t, d in step_events(ledger.get_run(run.id), 0) if t == "compensating"]
        assert compensating["approval_id"] == waiting.approval_id


def test_the_compensation_approval_requirement_is_frozen_when_the_step_runs(
    db_url: str, manifest: Path, tmp_path: Path
) -> None:
    """Editing the manifest later changes nothing for a past step, either way (the reference page)."""
    lifted = tmp_path / "lifted.yaml"
    lifted.write_text(manifest.read_text().replace("requires_approval: true", "requires_approval: false"))
    with reversi.open(db_url, manifests=[str(manifest)]) as ledger:
        required = ledger.start_run()
        transfer(required)
    with reversi.open(db_url, manifests=[str(lifted)]) as ledger:
        not_required = ledger.start_run()
        transfer(not_required)

    with reversi.open(db_url, manifests=[str(lifted)]) as edited:  # the requirement lifted since
        again = edited.get_run(required.id)
        assert again.plan().actions[0].to_dict()["needs_approval"] is True
        undo = Undo()
        report = again.rollback(compensate=undo)
        assert [a.step for a in report.awaiting_approval] == [0] and undo.calls == []
    with reversi.open(db_url, manifests=[str(manifest)]) as edited:  # the requirement added since
        again = edited.get_run(not_required.id)
        assert again.plan().actions[0].to_dict()["needs_approval"] is False
        undo = Undo()
        assert again.rollback(compensate=undo).compensated == [0] and len(undo.calls) == 1


def test_a_step_that_ran_without_an_entry_takes_the_approval_rule_of_the_entry_it_has_now(
    db_url: str, manifest: Path, tmp_path: Path
) -> None:
    bare = tmp_path / "bare.yaml"
    bare.write_text("version: 1\ntools: {}\n")
    with reversi.open(db_url, manifests=[str(bare)]) as ledger:
        run = ledger.start_run()
        transfer(run)  # no entry at all when it ran: nothing was snapshotted
    with reversi.open(db_url, manifests=[str(manifest)]) as ledger:
        assert ledger.get_run(run.id).plan().actions[0].to_dict()["needs_approval"] is True


def test_the_plan_foresees_a_denied_compensation_approval_as_the_rollback_will_meet_it(
    ledger: reversi.Ledger,
) -> None:
    """A denial stands until someone approves: the plan says so on the step and defers what the step
    depends on (so it is not fully reversible), exactly as the rollback then reports."""
    run = ledger.start_run()
    opened = run.begin("github.create_repo", {"name": "x"})
    opened.succeeded({"full_name": "acme/x"})
    transfer(run, depends_on=(opened.index,))
    assert run.plan().fully_reversible  # pending, or not asked yet: approving them is the operator's call
    [waiting] = run.rollback(compensate=Undo()).awaiting_approval
    ledger.deny(waiting.approval_id, note="not this one")

    plan = run.plan()
    denied, held = plan.actions
    why = f"approval {waiting.approval_id} denied: stays until someone approves it"
    assert (denied.to_dict()["kind"], denied.to_dict()["reason"]) == ("compensate", why)
    assert (held.kind.value, held.blocked_by) == ("defer", (1,))
    assert not plan.fully_reversible
    assert plan.to_text().splitlines()[0].endswith(f"compensate -> bank.reverse_transfer  {why}")
    report = run.rollback(compensate=Undo(), approve_compensations=True)  # does not override a denial
    assert [(a.step, a.status) for a in report.awaiting_approval] == [(1, "denied")]
    assert [(d.step, tuple(d.blocked_by)) for d in report.deferred] == [(0, (1,))]

    ledger.approve(waiting.approval_id, note="changed my mind")
    assert run.plan().fully_reversible and "reason" not in run.plan().actions[0].to_dict()


def test_approving_compensations_with_the_rollback_is_one_journaled_decision(ledger: reversi.Ledger) -> None:
    run = ledger.start_run()
    transfer(run)
    transfer(run)
    run.rollback(compensate=Undo())  # both requests now pending

    report = run.rollback(compensate=Undo(), approve_compensations=True, actor="dana")

    assert report.compensated == [1, 0] and report.complete
    granted = [e for e in run.events() if e.type == "approval_granted"]
    assert [(e.actor, e.data["note"]) for e in granted] == [("dana", APPROVE_ALL_NOTE)] * 2
    assert {a.status.value for a in ledger.approvals()} == {"approved"}


def test_approving_compensations_with_the_rollback_never_overrides_a_denial(ledger: reversi.Ledger) -> None:
    run = ledger.start_run()
    transfer(run)
    [waiting] = run.rollback(compensate=Undo()).awaiting_approval
    ledger.deny(waiting.approval_id, note="the customer keeps the money", by="dana")
    undo = Undo()

    report = run.rollback(compensate=undo, approve_compensations=True)

    assert [a.to_dict() for a in report.awaiting_approval] == [
        {"step": 0, "approval_id": waiting.approval_id, "status": "denied"}
    ]
    assert undo.calls == []
    ledger.approve(waiting.approval_id, by="dana", note="changed my mind")
    assert run.rollback(compensate=undo).compensated == [0]


def repo_and_file(run: reversi.Run) -> None:
    run.begin("github.create_repo", {"name": "x"}).succeeded({"full_name": "acme/x"})
    run.begin("github.create_file", {"repo": "acme/x", "path": "README.md"}).succeeded({"sha": "1"})


def test_a_failed_compensation_defers_what_it_depends_on_transitively(ledger: reversi.Ledger) -> None:
    run = ledger.start_run()
    charge(run, 1)  # 0
    run.begin("jobs.start", {"n": 1}, depends_on=[0]).succeeded({"id": "job_1"})  # 1 depends on 0
    run.begin("github.create_file", {"repo": "r", "path": "p"}, depends_on=[1]).succeeded({})  # 2 depends on 1
    charge(run, 2)  # 3 independent
    undo = Undo(fail_tools=("github.delete_file",))

    report = run.rollback(compensate=undo)

    assert report.compensated == [3]
    assert [f.step for f in report.failed] == [2]
    assert [d.to_dict() for d in report.deferred] == [{"step": 1, "blocked_by": [2]}, {"step": 0, "blocked_by": [1]}]
    assert undo.steps == [3, 2]
    assert [s.status.value for s in run.steps()] == ["succeeded", "succeeded", "compensation_failed", "compensated"]


def test_a_requires_dependency_is_deferred_while_its_dependents_undo_fails(ledger: reversi.Ledger) -> None:
    run = ledger.start_run()
    repo_and_file(run)

    report = run.rollback(compensate=Undo(fail_tools=("github.delete_file",)))

    assert [d.to_dict() for d in report.deferred] == [{"step": 0, "blocked_by": [1]}]
    fixed = run.rollback(compensate=Undo())
    assert fixed.compensated == [1, 0] and fixed.complete


def test_a_step_is_deferred_while_its_dependent_awaits_approval(ledger: reversi.Ledger) -> None:
    run = ledger.start_run()
    run.begin("github.create_repo", {"name": "x"}).succeeded({"full_name": "acme/x"})
    transfer(run, depends_on=(0,))
    undo = Undo()

    report = run.rollback(compensate=undo)

    assert [a.step for a in report.awaiting_approval] == [1]
    assert [d.to_dict() for d in report.deferred] == [{"step": 0, "blocked_by": [1]}]
    assert undo.calls == []


def test_a_deferred_step_asks_for_no_approval(ledger: reversi.Ledger) -> None:
    run = ledger.start_run()
    transfer(run)  # 0 needs approval, but...
    run.begin("email.send", {"to": "a@b.c"}, depends_on=[0]).succeeded({})  # 1 cannot be undone

    report = run.rollback(compensate=Undo())

    assert [d.to_dict() for d in report.deferred] == [{"step": 0, "blocked_by": [1]}]
    assert report.awaiting_approval == [] and ledger.approvals() == []


def test_every_step_lands_in_exactly_one_list_of_the_report(ledger: reversi.Ledger) -> None:
    run = ledger.start_run()
    run.begin("stripe.get_charge", {"id": "c"}).succeeded({})  # 0 skip
    run.begin("email.send", {"to": "a@b.c"}).succeeded({})  # 1 unrecoverable
    run.begin("weather.set", {"city": "x"}).succeeded({})  # 2 unmanifested
    run.begin("stripe.create_charge", {"amount": 1}).uncertain("timeout")  # 3 unresolved
    transfer(run)  # 4 awaiting approval
    repo_and_file(run)  # 5, 6: 6 fails, 5 deferred
    payment_intent(run)  # 7 unverified
    charge(run)  # 8 compensated

    report = run.rollback(compensate=Undo(fail_tools=("github.delete_file",)))

    placed = report.compensated + report.skipped + report.unresolved + report.unmanifested
    placed += [x.step for x in report.failed + report.unrecoverable + report.deferred + report.awaiting_approval]
    assert sorted(placed) == list(range(9))
    assert report.unverified == [7] and 7 in report.compensated
    assert report.to_text().splitlines()[:1] == [
        "step 8  stripe.create_charge  compensated -> stripe.refund (1 attempt)"
    ]


def test_an_undo_whose_answer_json_cannot_hold_is_compensated_once_with_its_text(ledger: reversi.Ledger) -> None:
    """The compensator did its work: an answer that contains itself is kept as its repr, not retried."""
    run = ledger.start_run()
    charge(run)
    calls: list[dict[str, Any]] = []

    def undo(call: dict[str, Any]) -> Any:
        calls.append(call)
        answer: dict[str, Any] = {"refunded": True}
        answer["self"] = answer
        return answer

    report = run.rollback(compensate=undo, retry=reversi.Retry(attempts=3, base_ms=0, max_ms=0))

    assert report.complete and report.compensated == [0] and len(calls) == 1
    [done] = [d for t, d in step_events(run, 0) if t == "compensated"]
    assert done["result"] == "{'refunded': True, 'self': {...}}"


def test_retry_may_be_given_as_the_reference_pages_mapping(ledger: reversi.Ledger) -> None:
    run = ledger.start_run()
    charge(run)
    undo = Undo(fail_first=2)

    report = run.rollback(compensate=undo, retry={"attempts": 3, "base_ms": 0, "max_ms": 0})

    assert report.complete and [c["attempt"] for c in undo.calls] == [1, 2, 3]
    for bad, message in (
        ({"attempts": 3, "tries": 2}, "retry: unknown field 'tries' (known: attempts, base_ms, max_ms)"),
        ({"attempts": 0}, "retries must be a whole number of attempts from 1 to 10, got 0"),
        (3, "retry must be a Retry or a mapping of attempts, base_ms and max_ms, got 3"),
    ):
        with pytest.raises(BadInput) as raised:
            run.rollback(compensate=undo, retry=bad)  # type: ignore[arg-type]
        assert str(raised.value) == message


def test_a_failed_attempt_says_when_the_next_goes_and_the_last_says_none(ledger: reversi.Ledger) -> None:
    run = ledger.start_run()
    charge(run)
    report = run.rollback(compensate=Undo(fail_first=5), retry=reversi.Retry(attempts=2, base_ms=0, max_ms=0))
    assert report.failed
    failed = [d for t, d in step_events(run, 0) if t == "compensation_failed"]
    assert [d["attempt"] for d in failed] == [1, 2]
    assert "retry_at" in failed[0] and "retry_at" not in failed[1]
