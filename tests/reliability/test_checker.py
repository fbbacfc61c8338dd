"""The checker finds each kind of violation it names, and none in a run that went right: each test
builds a real journal and a real witness log, breaks one thing the way a bug would, and reads the verdict."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.reliability.checker import check, reference_fold
from tests.reliability.journal import RawEvent
from tests.reliability.witness import Refusal, Witness
from tests.reliability.world import ACKS, MANIFEST, REPORTS, append_line

import reversi
from reversi.core.models import EventType, NewEvent, StepStatus


class World:
    """A store, its ledger, and the witness in this process, in one directory."""

    def __init__(self, url: str, directory: Path) -> None:
        self.url, self.directory = url, directory
        manifest = directory / "world.yaml"
        manifest.write_text(MANIFEST)
        self.ledger = reversi.open(url, manifests=[str(manifest)])
        self.witness = Witness(directory, url)

    def call(self, run: reversi.Run, tool: str, op: str, **extra: Any) -> None:
        run.call(tool, {"op": op, **extra}, lambda **args: self.witness.forward(tool, args))

    def undo(self, call: dict[str, Any]) -> Any:
        return self.witness.compensate(call["tool"], call["args"], call["idempotency_key"], call, "command")

    def rollback(self, run: reversi.Run) -> dict[str, Any]:
        report = run.rollback(compensate=self.undo, verifier=self.witness.read,
                              retry=reversi.Retry(attempts=3, base_ms=0, max_ms=0)).to_dict()
        append_line(self.directory / REPORTS, {"source": "test", "report": report})
        return dict(report)

    def kinds(self) -> set[str]:
        return {v.kind for v in check(self.url, self.directory)}


@pytest.fixture
def world(db_url: str, tmp_path: Path) -> Iterator[World]:
    made = World(db_url, tmp_path)
    yield made
    made.witness.close()
    made.ledger.close()


def test_a_run_recorded_crashed_settled_and_rolled_back_as_the_spec_says_has_no_violation(world: World) -> None:
    run = world.ledger.start_run("run_fine")
    world.call(run, "w_create", "a", undo_fails=1, read_lag=1)
    world.call(run, "w_attach", "b")
    with pytest.raises(Refusal):
        world.call(run, "w_charge", "c", fail=True)
    handle = run.begin("w_charge", {"op": "d"})  # the caller dies here: `intended`, never reported
    world.witness.forward("w_charge", {"op": "d"})
    append_line(world.directory / ACKS, {"run_id": run.id, "step": handle.index, "type": "intended"})
    run.resolve(handle.index, "succeeded", result={"id": "d"}, note="seen downstream")
    report = world.rollback(run)
    assert report["complete"] and sorted(report["compensated"]) == [0, 1, 3]
    assert check(world.url, world.directory) == []


def test_a_call_the_downstream_saw_before_its_intended_was_committed_is_caught(world: World) -> None:
    world.ledger.start_run("run_early")
    world.witness.forward("w_create", {"op": "early"})  # a caller that acted first and journaled after
    assert world.kinds() == {"journal-before-call"}


def test_an_undo_without_a_compensating_of_its_own_and_with_another_key_is_caught(world: World) -> None:
    run = world.ledger.start_run("run_rogue")
    world.call(run, "w_charge", "x")
    world.witness.compensate("w_refund", {"id": "x"}, "not-the-key", {"run_id": run.id, "step": 0}, "command")
    assert world.kinds() == {"journal-before-undo", "wrong-key"}


def test_an_effect_undone_by_two_keys_is_caught(world: World) -> None:
    run = world.ledger.start_run("run_twice")
    world.call(run, "w_charge", "y")
    world.rollback(run)
    with world.ledger.store.write() as q:  # a second undo of step 0, journaled, under a key of its own
        q.append(run.id, [NewEvent(EventType.COMPENSATING, 0, "bug", {"idempotency_key": "k2", "attempt": 1})])
    world.witness.compensate("w_refund", {"id": "y"}, "k2", {"run_id": run.id, "step": 0}, "command")
    assert "undone-twice" in world.kinds()


def test_an_undo_of_something_that_never_happened_is_caught(world: World) -> None:
    run = world.ledger.start_run("run_phantom")
    run.begin("w_charge", {"op": "never"}).succeeded({"id": "never"})  # claimed, never called
    report = world.rollback(run)
    assert report["failed"]
    assert "phantom-undo" in world.kinds()


def test_events_out_of_the_spec_order_are_caught(world: World) -> None:
    run = world.ledger.start_run("run_order")
    world.call(run, "w_charge", "z")
    with world.ledger.store.write() as q:
        q.append(run.id, [NewEvent(EventType.COMPENSATED, 0, "bug", {})])  # no `compensating` before it
    assert world.kinds() == {"bad-sequence", "false-report"}


def test_an_engine_that_folds_events_wrongly_is_caught(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    run = world.ledger.start_run("run_fold")
    world.call(run, "w_charge", "f", undo_fails=5)
    assert world.rollback(run)["failed"]
    from reversi.core import models

    monkeypatch.setitem(models._STATUS_AFTER, EventType.COMPENSATION_FAILED, StepStatus.COMPENSATED)
    assert world.kinds() == {"status-mismatch"}


def test_a_report_of_an_undo_nobody_saw_is_caught(world: World) -> None:
    run = world.ledger.start_run("run_boast")
    world.call(run, "w_charge", "r")
    append_line(world.directory / REPORTS, {"source": "bug", "report": {"run_id": run.id, "compensated": [0]}})
    assert world.kinds() == {"false-report"}


def test_a_call_journaled_failed_that_took_effect_is_caught(world: World) -> None:
    run = world.ledger.start_run("run_denial")

    def acted_then_raised(**args: Any) -> None:
        world.witness.forward("w_charge", args)
        raise ValueError("a client that raised after the call went through")

    with pytest.raises(ValueError):
        run.call("w_charge", {"op": "q"}, acted_then_raised)
    assert world.kinds() == {"false-failure"}


def test_an_acknowledged_event_missing_from_the_journal_is_caught(world: World) -> None:
    run = world.ledger.start_run("run_lost")
    world.call(run, "w_charge", "l")
    append_line(world.directory / ACKS, {"run_id": run.id, "step": 0, "type": "compensated"})
    append_line(world.directory / ACKS, {"run_id": run.id, "op": "nope", "type": "intended"})
    assert [v.kind for v in check(world.url, world.directory)] == ["lost", "lost"]


def test_the_reference_fold_names_each_event_that_cannot_be_where_it_is() -> None:
    def ev(seq: int, type_: str, **data: Any) -> RawEvent:
        return RawEvent("run_x", seq, 0, type_, "2026-12-03T00:00:00Z", data)

    assert reference_fold([ev(0, "intended"), ev(1, "uncertain"), ev(2, "resolved", status="succeeded"),
                           ev(3, "compensating"), ev(4, "verified"), ev(5, "compensated")]) == ("compensated", [])
    _, problems = reference_fold([ev(0, "intended"), ev(1, "succeeded"), ev(2, "failed"),
                                       ev(3, "resolved", status="failed"), ev(4, "compensated")])
    assert problems == ["seq 2: failed after succeeded", "seq 3: resolved after failed",
                        "seq 4: compensated after failed"]
    assert reference_fold([ev(0, "succeeded")])[1] == ["seq 0: succeeded after nothing"]
    corrected = [ev(0, "intended"), ev(1, "uncertain"), ev(2, "resolved", status="succeeded"),
                 ev(3, "resolved", status="failed", correction=True)]
    assert reference_fold(corrected) == ("failed", [])  # a settlement by hand, corrected
    _, problems = reference_fold([*corrected[:3], ev(3, "compensating"), ev(4, "compensation_failed"),
                                  ev(5, "resolved", status="failed", correction=True)])
    assert problems == ["seq 5: resolved after compensation_failed"]  # an undo was tried: no correction


def test_a_refused_downstream_call_is_an_error_the_sdk_journals_as_failed(world: World) -> None:
    run = world.ledger.start_run("run_no")
    with pytest.raises(Refusal):
        world.call(run, "w_charge", "n", fail=True)
    assert [s.status.value for s in run.steps()] == ["failed"]
    assert check(world.url, world.directory) == []
