"""`deadline_first` (issue 30) against a model, with Hypothesis: random runs of steps with `depends_on`
between them, undo windows or none, and undos that fail. The walk never offers a step's undo while a
step that depends on it stands, takes every step once, always takes the soonest-closing ready step,
undoes exactly what newest-first undoes, and without windows is newest first."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from reversi.core.manifest import ManifestSet
from reversi.core.manifest_yaml import parse_manifest
from reversi.core.models import Event, Mode, RunRecord, RunSnapshot, Scope, StepRecord, derive_step
from reversi.core.plan import ActionKind
from reversi.core.times import format_time
from reversi.core.walk import RollbackWalk

T = datetime(2026, 12, 5, 12, 0, tzinfo=UTC)
MANIFESTS = ManifestSet(parse_manifest("""
version: 1
tools:
  windowed:
    undo_until: "$result.until"
    compensation: {tool: undo, args: {id: "$result.id"}}
  plain:
    compensation: {tool: undo, args: {id: "$result.id"}}
""", "m.yaml")[0])


@st.composite
def runs(draw: Any) -> tuple[RunSnapshot, dict[int, bool]]:
    """A run of succeeded steps (each with its earlier steps it depends on, and a window in hours or
    none), and whether each step's undo will succeed."""
    n = draw(st.integers(1, 9))
    run = RunRecord("run_m", "p", Mode.OBSERVE, Scope("", "", ""), {}, "2026-01-01T00:00:00Z")
    states, works = [], {}
    for i in range(n):
        depends = tuple(sorted(draw(st.sets(st.integers(0, i - 1), max_size=3)))) if i else ()
        hours = draw(st.one_of(st.none(), st.integers(1, 6)))
        result = {"id": i} | ({"until": format_time(T + timedelta(hours=hours))} if hours is not None else {})
        tool = "windowed" if hours is not None else "plain"
        events = [Event("run_m", 2 * i, i, "intended", "t", "", {"tool": tool, "args": {}}),
                  Event("run_m", 2 * i + 1, i, "succeeded", "t", "", {"result": result})]
        states.append(derive_step(StepRecord("run_m", i, tool, {}, depends), events))
        works[i] = draw(st.booleans())
    return RunSnapshot(run, tuple(states)), works


def _walk(snapshot: RunSnapshot, works: dict[int, bool], deadline_first: bool) -> tuple[list[Any], set[int]]:
    """The actions in the order taken, and the steps undone, the undo of each step working or not."""
    walk = RollbackWalk(snapshot, MANIFESTS, now=T, deadline_first=deadline_first)
    taken, undone = [], set()
    for action in walk:
        taken.append(action)
        if action.kind is ActionKind.COMPENSATE:
            if works[action.step]:
                undone.add(action.step)
            else:
                walk.still_stands(action.step)
    return taken, undone


def _key(snapshot: RunSnapshot, step: int) -> tuple[str, int]:
    result = snapshot.step(step).result
    return (result.get("until", "~"), -step)


@settings(max_examples=300, deadline=None)
@given(runs())
def test_deadline_first_keeps_every_dependency_and_undoes_what_newest_first_does(
    drawn: tuple[RunSnapshot, dict[int, bool]]
) -> None:
    snapshot, works = drawn
    dependents = {s.index: {d.index for d in snapshot.steps if s.index in d.record.depends_on}
                  for s in snapshot.steps}
    taken, undone = _walk(snapshot, works, deadline_first=True)
    order = [a.step for a in taken]
    assert sorted(order) == [s.index for s in snapshot.steps]  # each step once
    seen: set[int] = set()
    for action in taken:
        step = action.step
        assert dependents[step] <= seen, f"step {step} taken before a step that depends on it"
        if action.kind is ActionKind.COMPENSATE:
            assert dependents[step] <= undone, f"step {step} offered while a dependent stands"
        else:
            assert action.kind is ActionKind.DEFER and not dependents[step] <= undone
        ready = [s.index for s in snapshot.steps if s.index not in seen and dependents[s.index] <= seen]
        assert _key(snapshot, step) == min(_key(snapshot, r) for r in ready), "not the soonest ready step"
        seen.add(step)
    _, newest_first_undone = _walk(snapshot, works, deadline_first=False)
    assert undone == newest_first_undone


@settings(max_examples=100, deadline=None)
@given(runs())
def test_without_windows_deadline_first_is_newest_first(drawn: tuple[RunSnapshot, dict[int, bool]]) -> None:
    snapshot, works = drawn
    plain = RunSnapshot(snapshot.run, tuple(
        derive_step(StepRecord("run_m", s.index, "plain", {}, s.record.depends_on),
                    [Event("run_m", 0, s.index, "intended", "t", "", {"tool": "plain", "args": {}}),
                     Event("run_m", 1, s.index, "succeeded", "t", "", {"result": {"id": s.index}})])
        for s in snapshot.steps))
    taken, _ = _walk(plain, works, deadline_first=True)
    assert [a.step for a in taken] == sorted((s.index for s in plain.steps), reverse=True)
