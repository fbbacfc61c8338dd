"""Rollbacks that undo independent steps at once (`concurrency`): the same report as one at a time, never a
step while one that depends on it stands, every undo with its own journal entries and key."""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import reversi
from reversi.errors import BadInput

WAIT_S = 60.0


class Witness:
    """An async compensator that logs when each undo starts and ends; it fails the undo of the tools and
    job ids it is told to, and holds the first `gate` calls until that many are in flight at once."""

    def __init__(self, fail_jobs: tuple[str, ...] = (), gate: int = 0) -> None:
        self.log: list[tuple[str, int]] = []
        self.fail_jobs = fail_jobs
        self.gate = gate
        self._arrived = 0
        self._open: asyncio.Event | None = None

    async def __call__(self, call: dict[str, Any]) -> Any:
        step = call["step"]
        self.log.append(("start", step))
        if self._arrived < self.gate:
            self._open = self._open or asyncio.Event()
            self._arrived += 1
            if self._arrived == self.gate:
                self._open.set()
            await asyncio.wait_for(self._open.wait(), WAIT_S)  # all `gate` calls are in flight together
        await asyncio.sleep(0)  # let the others run in between
        self.log.append(("end", step))
        if call["args"].get("job") in self.fail_jobs:
            raise ConnectionError("downstream said 503")
        return {"undone": call["tool"]}

    def order(self, event: str, step: int) -> int:
        return self.log.index((event, step))


def record(run: reversi.Run) -> dict[int, list[int]]:
    """A run of every kind of step, with chains: returns, for each step, the steps that depend on it."""
    dependents: dict[int, list[int]] = {}

    def begin(tool: str, args: dict[str, Any], result: Any, depends_on: tuple[int, ...] = ()) -> int:
        handle = run.begin(tool, args, depends_on=list(depends_on))
        handle.succeeded(result)
        for target in depends_on:
            dependents.setdefault(target, []).append(handle.index)
        return handle.index

    for n in range(4):
        repo = begin("github.create_repo", {"name": f"r{n}"}, {"full_name": f"acme/r{n}"})
        job = begin("jobs.start", {"n": n}, {"id": f"job_{n}"}, (repo,))
        begin("jobs.deploy", {"n": n}, {"id": f"deploy_{n}"}, (job,))
        begin("stripe.create_charge", {"amount": n}, {"id": f"ch_{n}"})
        begin("stripe.get_charge", {"id": f"ch_{n}"}, {"id": f"ch_{n}"})
        begin("crm.upsert_contact", {"n": n}, {"ok": True})
    begin("email.send", {"to": "a@example.com"}, {"sent": True})
    begin("bank.transfer", {"amount": 5}, {"id": "tr_1"})  # its undo waits for an approval
    run.begin("unknown.tool", {"x": 1}).succeeded({})
    run.begin("stripe.create_charge", {"amount": 99})  # left intended: unresolved
    return dependents


def test_a_concurrent_rollback_reports_what_one_at_a_time_reports(ledger: reversi.Ledger) -> None:
    one, many = ledger.start_run(), ledger.start_run()
    record(one)
    record(many)

    in_turn = one.rollback(compensate=Witness(fail_jobs=("deploy_1", "job_2")))
    at_once = many.rollback(compensate=Witness(fail_jobs=("deploy_1", "job_2")), concurrency=8)

    approvals = dict(zip([a.approval_id for a in at_once.awaiting_approval],
                         [a.approval_id for a in in_turn.awaiting_approval], strict=True))
    assert same_ids(at_once.to_dict(), approvals) | {"run_id": one.id} == in_turn.to_dict()
    assert same_ids(at_once.to_text(), approvals) == in_turn.to_text()
    assert [s.status for s in many.steps()] == [s.status for s in one.steps()]
    assert {d.step for d in at_once.deferred} == {7, 6, 12}  # behind the failed undos of deploy_1 (8) and job_2 (13)


def same_ids(report: Any, approvals: dict[str, str]) -> Any:
    """`report` (a dict or a text) with its approval ids swapped for the other run's."""
    text = report if isinstance(report, str) else json.dumps(report)
    for mine, theirs in approvals.items():
        text = text.replace(mine, theirs)
    return text if isinstance(report, str) else json.loads(text)


def test_no_undo_starts_before_every_step_that_depends_on_it_is_undone(ledger: reversi.Ledger) -> None:
    run = ledger.start_run()
    dependents = record(run)
    witness = Witness()

    report = run.rollback(compensate=witness, concurrency=4)

    assert set(report.compensated) >= {s for s, deps in dependents.items() if deps}
    for target, later in dependents.items():
        for dependent in later:
            assert witness.order("end", dependent) < witness.order("start", target), (dependent, target)


def test_independent_undos_run_at_once(ledger: reversi.Ledger) -> None:
    run = ledger.start_run()
    for n in range(10):
        run.begin("stripe.create_charge", {"amount": n}).succeeded({"id": f"ch_{n}"})
    witness = Witness(gate=6)  # the first six hold until all six are in flight

    report = run.rollback(compensate=witness, concurrency=6)

    assert report.complete and sorted(report.compensated) == list(range(10))
    assert report.compensated == list(range(9, -1, -1))  # newest first, as one at a time would list them


def test_a_blocking_compensator_runs_in_threads_side_by_side(ledger: reversi.Ledger) -> None:
    run = ledger.start_run()
    for n in range(8):
        run.begin("stripe.create_charge", {"amount": n}).succeeded({"id": f"ch_{n}"})
    together = threading.Barrier(4, timeout=WAIT_S)  # broken (and the undo fails) unless four meet
    passed: list[int] = []

    def undo(call: dict[str, Any]) -> dict[str, Any]:
        if len(passed) < 4:
            together.wait()
        passed.append(call["step"])
        return {"ok": True}

    report = run.rollback(compensate=undo, concurrency=4)

    assert report.complete, report.to_text()
    assert sorted(passed) == list(range(8))


def test_each_step_keeps_its_own_key_and_journal_entries(ledger: reversi.Ledger) -> None:
    run = ledger.start_run()
    for n in range(12):
        run.begin("stripe.create_charge", {"amount": n}).succeeded({"id": f"ch_{n}"})
    seen: list[str] = []

    async def undo(call: dict[str, Any]) -> dict[str, Any]:
        seen.append(call["idempotency_key"])
        return {"ok": True}

    assert run.rollback(compensate=undo, concurrency=5).complete
    assert len(set(seen)) == 12
    events = run.events()
    assert [e.seq for e in events] == list(range(len(events)))
    by_step = Counter((e.step, e.type) for e in events)
    assert all(by_step[(n, "compensating")] == 1 and by_step[(n, "compensated")] == 1 for n in range(12))
    for n in range(12):
        types = [e.type for e in events if e.step == n]
        assert types[-2:] == ["compensating", "compensated"]


@pytest.mark.parametrize("bad", [0, -1, 65, "2", 2.0, True, None])
def test_a_concurrency_out_of_range_is_bad_input_and_changes_nothing(ledger: reversi.Ledger, bad: Any) -> None:
    run = ledger.start_run()
    run.begin("stripe.create_charge", {"amount": 1}).succeeded({"id": "ch_1"})
    before = len(run.events())

    with pytest.raises(BadInput, match="concurrency must be a whole number from 1 to 64"):
        run.rollback(compensate=lambda call: {"ok": True}, concurrency=bad)

    assert len(run.events()) == before


class Died(BaseException):
    """The process dies here: nothing after it runs."""


def test_a_crash_amid_concurrent_undos_is_finished_by_a_rerun_with_each_undo_taking_effect_once(
    ledger: reversi.Ledger,
) -> None:
    run = ledger.start_run()
    for n in range(10):
        run.begin("stripe.create_charge", {"amount": n}).succeeded({"id": f"ch_{n}"})
    applied: Counter[str] = Counter()
    calls = 0

    async def undo(call: dict[str, Any]) -> dict[str, Any]:
        nonlocal calls
        calls += 1
        if calls == 4:
            raise Died()
        applied[call["idempotency_key"]] += 1
        return {"ok": True}

    with pytest.raises(Died):
        run.rollback(compensate=undo, concurrency=3)
    assert 0 < len(applied) < 10
    calls = 100

    async def idempotent(call: dict[str, Any]) -> dict[str, Any]:
        if not applied[call["idempotency_key"]]:
            applied[call["idempotency_key"]] += 1
        return {"ok": True}

    report = run.rollback(compensate=idempotent, concurrency=3)

    assert report.complete
    assert set(applied.values()) == {1} and len(applied) == 10
    compensated = Counter(e.step for e in run.events() if e.type == "compensated")
    assert compensated == Counter(range(10))


RESOURCES = """version: 1
tools:
  doc.write:
    resources: ["doc:${args.id}"]
    compensation: {tool: doc.revert, args: {id: "$args.id"}}
  doc.publish:
    requires: ["doc.write"]
    resources: ["doc:${args.id}"]
    compensation: {tool: doc.unpublish, args: {id: "$args.id"}}
"""


@pytest.mark.parametrize("options", [{"concurrency": 1}, {"concurrency": 8}, {"deadline_first": True},
                                     {"deadline_first": True, "concurrency": 4}], ids=str)
def test_calls_answered_out_of_order_on_one_resource_are_all_undone_newest_first(
    db_url: str, tmp_path: Path, options: dict[str, Any]
) -> None:
    """A resource makes the write depend on the publish (its outcome came last) while the publish requires
    the write: a cycle, unless only newer steps hold back older ones, as one at a time they do."""
    (tmp_path / "docs.yaml").write_text(RESOURCES)
    with reversi.open(db_url, manifests=[str(tmp_path / "docs.yaml")]) as ledger:
        run = ledger.start_run()
        write, publish = run.begin("doc.write", {"id": "Y"}), run.begin("doc.publish", {"id": "Y"})
        publish.succeeded({})
        write.succeeded({})
        called: list[int] = []

        report = run.rollback(compensate=lambda call: called.append(call["step"]), **options)

        assert report.complete and report.compensated == [1, 0] and called == [1, 0]
        assert [s.status.value for s in run.steps()] == ["compensated", "compensated"]


def test_a_cancelled_concurrent_rollback_keeps_the_run_until_its_undos_in_threads_end(ledger: reversi.Ledger) -> None:
    """A sync undo in the pool cannot be stopped: were the run's lease given back while it runs, the next
    rollback of the run could send the same undo beside it."""
    run = ledger.start_run()
    for n in range(3):
        run.begin("stripe.create_charge", {"amount": n}).succeeded({"id": f"ch_{n}"})
    started, release = threading.Barrier(4, timeout=WAIT_S), threading.Event()
    held_as_they_end: list[bool] = []

    def undo(call: dict[str, Any]) -> dict[str, Any]:
        started.wait()
        release.wait(WAIT_S)
        held_as_they_end.append(ledger.store.rollback_held(run.id))
        return {"ok": True}

    async def main() -> None:
        rolling = asyncio.create_task(run.arollback(compensate=undo, concurrency=3))
        await asyncio.to_thread(started.wait)  # all three undos are under way
        rolling.cancel()
        done, _ = await asyncio.wait({rolling}, timeout=1.0)  # it may not end while they run
        assert not done
        release.set()
        with contextlib.suppress(asyncio.CancelledError):
            await rolling

    asyncio.run(main())
    assert held_as_they_end == [True, True, True]
    assert not ledger.store.rollback_held(run.id)


WINDOWS = """version: 1
tools:
  bank.wire:
    undo_until: "$result.recallable_until"
    compensation: {tool: bank.recall, args: {id: "$result.id"}}
"""


def test_a_deadline_first_rollback_at_once_reports_in_the_order_of_its_undo_windows(
    db_url: str, tmp_path: Path
) -> None:
    """Of independent steps, the soonest-closing undo window first: the report follows that order (not
    newest first), as one at a time it would."""
    (tmp_path / "wires.yaml").write_text(WINDOWS)
    closes = ["2099-01-03T00:00:00Z", "2099-01-01T00:00:00Z", "2099-01-04T00:00:00Z", "2099-01-02T00:00:00Z"]
    with reversi.open(db_url, manifests=[str(tmp_path / "wires.yaml")]) as ledger:
        one, many = ledger.start_run(), ledger.start_run()
        for run in (one, many):
            for n, until in enumerate(closes):
                run.begin("bank.wire", {"n": n}).succeeded({"id": f"w{n}", "recallable_until": until})

        in_turn = one.rollback(compensate=lambda call: {"ok": True}, deadline_first=True)
        at_once = many.rollback(compensate=lambda call: {"ok": True}, deadline_first=True, concurrency=4)

    assert in_turn.compensated == [1, 3, 0, 2]  # by their windows
    assert at_once.compensated == in_turn.compensated
    assert at_once.to_text() == in_turn.to_text()
