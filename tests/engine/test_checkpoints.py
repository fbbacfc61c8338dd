"""Checkpoints: journaled under the run's lock, and a plan or rollback of the steps after one only."""

from __future__ import annotations

import asyncio
import re
import threading
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.engine.test_planner_properties import MANIFESTS, model, runs, snapshot

import reversi
from reversi.core.checkpoints import RollbackScope
from reversi.core.plan import compensation_key
from reversi.core.planner import plan_rollback
from reversi.errors import BadInput, Conflict, NotFound


class Undo:
    """A compensator that counts its calls by idempotency key."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def __call__(self, call: dict[str, Any]) -> Any:
        self.calls.append(call)
        return {"undone": call["step"]}

    def count(self, run_id: str, step: int) -> int:
        key = compensation_key(run_id, step, "stripe.refund")
        return sum(c["idempotency_key"] == key for c in self.calls)


def charges(run: reversi.Run, n: int) -> None:
    for i in range(n):
        with run.step("stripe.create_charge", {"amount": 100 + i}) as s:
            s.succeeded({"id": f"ch_{run.id}_{i}"})


def test_a_checkpoint_is_journaled_after_the_last_step(ledger: reversi.Ledger) -> None:
    run = ledger.start_run(actor="bot")
    first = run.checkpoint("start")
    charges(run, 2)
    second = run.checkpoint("before refactor")
    assert (first.name, first.after_step) == ("start", -1)
    assert (second.name, second.after_step) == ("before refactor", 1)
    assert run.checkpoints() == [first, second]
    events = [e for e in run.events() if e.type == "checkpoint"]
    assert [(e.step, e.actor, dict(e.data)) for e in events] == [
        (None, "bot", {"name": "start", "after_step": -1}),
        (None, "bot", {"name": "before refactor", "after_step": 1}),
    ]
    assert isinstance(asyncio.run(run.acheckpoint("async")), reversi.Checkpoint)


def test_a_second_checkpoint_of_the_same_name_is_a_conflict_naming_it(ledger: reversi.Ledger) -> None:
    run = ledger.start_run()
    run.checkpoint("x")
    with pytest.raises(Conflict, match="already has a checkpoint named 'x'"):
        run.checkpoint("x")
    assert len(run.checkpoints()) == 1
    other = ledger.start_run()
    other.checkpoint("x")  # unique within a run, not across runs


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("", "1-200 characters, not 0"),
        ("x" * 10_000, "1-200 characters, not 10000"),
        ("a\x1b[2Jb", "printable: it holds U+001B"),
        ("a\nb", "printable: it holds U+000A"),
        ("evil\u202etxt", "printable: it holds U+202E"),
        ("\x9b", "printable: it holds U+009B"),
        ("   ", "not be only spaces"),
        (7, "must be a string, not int"),
        (None, "must be a string, not NoneType"),
        (["a"], "must be a string, not list"),
    ],
)
def test_hostile_names_are_refused_in_one_line_and_nothing_is_journaled(
    ledger: reversi.Ledger, name: Any, message: str
) -> None:
    run = ledger.start_run()
    with pytest.raises(BadInput, match=re.escape(message)) as refused:
        run.checkpoint(name)
    assert "\n" not in str(refused.value) and len(str(refused.value)) < 200
    assert run.checkpoints() == []


def test_a_plan_after_a_checkpoint_lists_only_the_later_steps(ledger: reversi.Ledger) -> None:
    run = ledger.start_run()
    charges(run, 2)
    run.checkpoint("half")
    charges(run, 2)
    whole = run.plan()
    assert [a.step for a in whole.actions] == [3, 2, 1, 0]
    assert "scope" not in whole.to_dict()
    plan = run.plan(to="half")
    assert [a.step for a in plan.actions] == [3, 2]
    assert plan.to_dict()["scope"] == {"after_step": 1, "checkpoint": "half"}
    assert plan.to_text().splitlines()[0] == "scope: the steps after checkpoint 'half' (step 1); earlier steps are kept"
    by_number = run.plan(after_step=2)
    assert [a.step for a in by_number.actions] == [3]
    assert by_number.to_dict()["scope"] == {"after_step": 2, "checkpoint": None}
    assert [a.step for a in run.plan(after_step=-1).actions] == [3, 2, 1, 0]


def test_bad_scopes_are_refused(ledger: reversi.Ledger) -> None:
    run = ledger.start_run()
    charges(run, 2)
    run.checkpoint("c")
    with pytest.raises(BadInput, match="not both"):
        run.plan(to="c", after_step=0)
    with pytest.raises(NotFound, match="no checkpoint named 'nope'"):
        run.plan(to="nope")
    with pytest.raises(NotFound, match="no step 2 in"):
        run.plan(after_step=2)
    for bad in (-2, True, "1", 1.5):
        with pytest.raises(BadInput, match="after_step must be a step number"):
            run.plan(after_step=bad)  # type: ignore[arg-type]
    with pytest.raises(BadInput, match="printable"):
        run.plan(to="c\x1b")
    with pytest.raises(NotFound, match="no checkpoint"):
        run.rollback(Undo(), to="nope")


def test_a_scoped_rollback_then_a_whole_one_undoes_each_step_once(ledger: reversi.Ledger) -> None:
    run = ledger.start_run()
    charges(run, 2)
    run.checkpoint("before the risky part")
    charges(run, 3)
    undo = Undo()
    seen: list[tuple[int, int]] = []
    report = run.rollback(undo, to="before the risky part", progress=lambda done, total: seen.append((done, total)))
    assert report.compensated == [4, 3, 2]
    assert report.complete
    assert report.to_dict()["scope"] == {"after_step": 1, "checkpoint": "before the risky part"}
    assert seen == [(1, 3), (2, 3), (3, 3)]
    assert [s.status.value for s in run.steps()] == ["succeeded", "succeeded", "compensated", "compensated",
                                                     "compensated"]
    again = run.rollback(undo, after_step=1)
    assert again.compensated == [] and again.skipped == [4, 3, 2]
    whole = run.rollback(undo)
    assert whole.compensated == [1, 0] and whole.skipped == [4, 3, 2]
    assert "scope" not in whole.to_dict()
    assert all(undo.count(run.id, step) == 1 for step in range(5))
    assert len(undo.calls) == 5


def test_a_checkpoint_keeps_earlier_dependencies_standing(ledger: reversi.Ledger) -> None:
    run = ledger.start_run()
    with run.step("github.create_repo", {"name": "r"}) as s:
        s.succeeded({"full_name": "o/r"})
    run.checkpoint("repo made")
    with run.step("github.create_file", {"repo": "o/r", "path": "a"}) as s:
        s.succeeded({})
    plan = run.plan(to="repo made")
    assert [(a.step, a.kind.value) for a in plan.actions] == [(1, "compensate")]
    assert plan.fully_reversible


def test_racing_writers_of_one_name_leave_one_checkpoint(db_url: str, manifest: Any) -> None:
    """Eight ledgers (eight connections) take the same name at once: the run's lock lets one through."""
    with reversi.open(db_url, manifests=[str(manifest)]) as ledger:
        run_id = ledger.start_run().id
    barrier = threading.Barrier(8)
    outcomes: list[str] = []

    def take() -> None:
        with reversi.open(db_url, manifests=[str(manifest)]) as mine:
            run = mine.get_run(run_id)
            barrier.wait(timeout=30)
            try:
                run.checkpoint("the one")
                outcomes.append("made")
            except Conflict:
                outcomes.append("conflict")

    threads = [threading.Thread(target=take) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert sorted(outcomes) == ["conflict"] * 7 + ["made"]
    with reversi.open(db_url) as ledger:
        assert [c.name for c in ledger.get_run(run_id).checkpoints()] == ["the one"]


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_a_plan_after_step_n_is_the_whole_plan_cut_at_n(data: st.DataObject) -> None:
    """A step's dependents are later steps, so cutting the run after N changes no later step's action."""
    steps = data.draw(runs())
    after = data.draw(st.integers(-1, max(len(steps) - 1, -1)))
    snap = snapshot(steps)
    whole = plan_rollback(snap, MANIFESTS)
    cut = plan_rollback(snap, MANIFESTS, RollbackScope(after))
    assert cut.actions == tuple(a for a in whole.actions if a.step > after)
    expected = model(steps)
    assert all((a.kind, a.blocked_by) == expected[a.step] for a in cut.actions)
    assert cut.to_dict()["scope"] == {"after_step": after, "checkpoint": None}
