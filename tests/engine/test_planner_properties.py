"""The planner against an independent model of the rules, over random runs (hypothesis); and its notes.

The model below is written from the specification (§4 and the reference page), not from the
planner's code: the kind of each step from its status and manifest entry, then deferral walking
newest first, where a dependent that will still stand (unresolved, unmanifested, unrecoverable or
itself deferred) blocks the step it depends on.
"""

from __future__ import annotations

from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

import reversi
from reversi.core.manifest import ManifestSet
from reversi.core.manifest_yaml import parse_manifest
from reversi.core.models import Mode, RunRecord, RunSnapshot, Scope, StepRecord, StepState, StepStatus
from reversi.core.plan import ActionKind
from reversi.core.planner import plan_rollback

MANIFEST = """\
version: 1
tools:
  pay.charge:
    compensation: {tool: pay.refund, args: {id: "$result.id"}}
  pay.read:
    effect: read
  crm.upsert:
    idempotent: true
  mail.send:
    irreversible: true
  repo.create:
    compensation: {tool: repo.delete, args: {name: "$args.name"}}
  repo.file:
    requires: ["repo.*"]
    compensation: {tool: repo.unfile, args: {path: "$args.path"}}
  log.write:
    requires: ["pay.char?"]
  deploy.*:
    requires: ["repo.create", "pay.*"]
    compensation: {tool: deploy.rollback, args: {id: "$result.id"}}
"""
ENTRIES, PROBLEMS = parse_manifest(MANIFEST, "tools.yaml")
MANIFESTS = ManifestSet(ENTRIES)
TOOLS = [
    "pay.charge",
    "pay.read",
    "crm.upsert",
    "mail.send",
    "repo.create",
    "repo.file",
    "log.write",
    "deploy.web",
    "x.unknown",
]
STANDING_KINDS = {ActionKind.UNRESOLVED, ActionKind.UNMANIFESTED, ActionKind.UNRECOVERABLE, ActionKind.DEFER}


def base_kind(tool: str, status: StepStatus, has_id: bool) -> ActionKind:
    """The kind before dependencies, straight from the rules."""
    if status in (StepStatus.FAILED, StepStatus.COMPENSATED):
        return ActionKind.SKIP
    if status in (StepStatus.INTENDED, StepStatus.UNCERTAIN):
        return ActionKind.UNRESOLVED
    if tool == "x.unknown":
        return ActionKind.UNMANIFESTED
    if tool in ("pay.read", "crm.upsert"):
        return ActionKind.SKIP
    if tool in ("mail.send", "log.write"):  # irreversible; no compensation declared
        return ActionKind.UNRECOVERABLE
    if tool in ("pay.charge", "deploy.web") and not has_id:  # `$result.id` names nothing
        return ActionKind.UNRECOVERABLE
    return ActionKind.COMPENSATE


def requires(tool: str) -> list[str]:
    return {"repo.file": ["repo.*"], "log.write": ["pay.char?"], "deploy.web": ["repo.create", "pay.*"]}.get(tool, [])


def model(steps: list[dict[str, Any]]) -> dict[int, tuple[ActionKind, tuple[int, ...]]]:
    """Each step's expected kind and `blocked_by`."""
    n = len(steps)
    dependents = {
        t: [
            s
            for s in range(t + 1, n)
            if t in steps[s]["depends_on"] or any(fnmatchcase(steps[t]["tool"], g) for g in requires(steps[s]["tool"]))
        ]
        for t in range(n)
    }
    final: dict[int, tuple[ActionKind, tuple[int, ...]]] = {}
    for t in reversed(range(n)):
        kind = base_kind(steps[t]["tool"], steps[t]["status"], steps[t]["has_id"])
        blocked: tuple[int, ...] = ()
        if kind is ActionKind.COMPENSATE:
            blocked = tuple(sorted(s for s in dependents[t] if final[s][0] in STANDING_KINDS))
            if blocked:
                kind = ActionKind.DEFER
        final[t] = (kind, blocked)
    return final


@st.composite
def runs(draw: st.DrawFn) -> list[dict[str, Any]]:
    n = draw(st.integers(0, 12))
    steps = []
    for i in range(n):
        steps.append(
            {
                "tool": draw(st.sampled_from(TOOLS)),
                "status": draw(st.sampled_from(list(StepStatus))),
                "has_id": draw(st.booleans()),
                "depends_on": tuple(sorted(draw(st.sets(st.integers(0, i - 1), max_size=3)))) if i else (),
            }
        )
    return steps


def snapshot(steps: list[dict[str, Any]]) -> RunSnapshot:
    run = RunRecord("run_prop", "local", Mode.OBSERVE, Scope(), {}, "2025-01-01T00:00:00Z")
    states = []
    for i, s in enumerate(steps):
        record = StepRecord(run.run_id, i, s["tool"], {"name": f"n{i}", "path": f"p{i}"}, s["depends_on"])
        has_result = s["status"] not in (StepStatus.INTENDED, StepStatus.UNCERTAIN, StepStatus.FAILED)
        result = {"id": f"r{i}"} if s["has_id"] else {"other": i}
        states.append(StepState(record, s["status"], result if has_result else None, has_result))
    return RunSnapshot(run, tuple(states))


def test_the_model_manifest_is_valid() -> None:
    assert [p for p in PROBLEMS if not p.warning] == []


@settings(max_examples=300, deadline=None)
@given(runs())
def test_the_plan_matches_the_rules_for_any_run(steps: list[dict[str, Any]]) -> None:
    plan = plan_rollback(snapshot(steps), MANIFESTS)
    expected = model(steps)

    assert [a.step for a in plan.actions] == list(reversed(range(len(steps)))), "each step once, newest first"
    for action in plan.actions:
        assert (action.kind, action.blocked_by) == expected[action.step], (action.step, steps)
    assert plan.fully_reversible == all(k in (ActionKind.COMPENSATE, ActionKind.SKIP) for k, _ in expected.values())


@settings(max_examples=300, deadline=None)
@given(runs())
def test_no_step_is_undone_while_a_dependent_would_still_stand(steps: list[dict[str, Any]]) -> None:
    plan = plan_rollback(snapshot(steps), MANIFESTS)
    kinds = {a.step: a.kind for a in plan.actions}

    for action in plan.actions:
        for s in range(action.step + 1, len(steps)):
            depends = action.step in steps[s]["depends_on"] or any(
                fnmatchcase(steps[action.step]["tool"], g) for g in requires(steps[s]["tool"])
            )
            if depends and kinds[s] in STANDING_KINDS:
                assert action.kind is not ActionKind.COMPENSATE, (action.step, s)
                if action.kind is ActionKind.DEFER:
                    assert s in action.blocked_by
        if action.kind is ActionKind.DEFER:
            assert all(kinds[b] in STANDING_KINDS for b in action.blocked_by), "deferral is transitive, and only that"


@settings(max_examples=200, deadline=None)
@given(runs())
def test_a_step_that_needs_no_undo_is_never_deferred(steps: list[dict[str, Any]]) -> None:
    plan = plan_rollback(snapshot(steps), MANIFESTS)

    for action in plan.actions:
        s = steps[action.step]
        if base_kind(s["tool"], s["status"], s["has_id"]) is ActionKind.SKIP:
            assert action.kind is ActionKind.SKIP and action.blocked_by == ()


def test_a_chain_of_dependents_defers_transitively() -> None:
    steps = [
        {"tool": "repo.create", "status": StepStatus.SUCCEEDED, "has_id": True, "depends_on": ()},
        {"tool": "pay.charge", "status": StepStatus.SUCCEEDED, "has_id": True, "depends_on": (0,)},
        {"tool": "deploy.web", "status": StepStatus.SUCCEEDED, "has_id": True, "depends_on": ()},
        {"tool": "mail.send", "status": StepStatus.SUCCEEDED, "has_id": True, "depends_on": (2,)},
    ]

    plan = plan_rollback(snapshot(steps), MANIFESTS)

    assert [(a.step, a.kind.value, a.blocked_by) for a in plan.actions] == [
        (3, "unrecoverable", ()),
        (2, "defer", (3,)),
        (1, "defer", (2,)),
        (0, "defer", (1, 2)),
    ]
    assert plan.to_dict()["actions"][1]["blocked_by"] == [3]
    assert "step 0  repo.create  defer  blocked by steps 1, 2" in plan.to_text()


def test_the_plan_notes_a_manifest_entry_that_changed_since_the_step_ran(db_url: str, tmp_path: Path) -> None:
    before = tmp_path / "before.yaml"
    before.write_text(MANIFEST)
    with reversi.open(db_url, manifests=[str(before)]) as ledger:
        run = ledger.start_run()
        run.begin("pay.charge", {"amount": 1}).succeeded({"id": "ch_1"})
        run.begin("repo.create", {"name": "x"}).succeeded({})
        run.begin("new.tool", {"n": 1}).succeeded({"id": "t_1"})
        run.begin("pay.charge", {"amount": 2}).failed("declined")
        assert run.plan().notes == ()

    after = tmp_path / "after.yaml"
    after.write_text(
        MANIFEST.replace("pay.refund, args", "pay.refund_v2, args")
        + '  new.tool:\n    compensation: {tool: new.undo, args: {id: "$result.id"}}\n'
    )
    with reversi.open(db_url, manifests=[str(after)]) as ledger:
        plan = ledger.get_run(run.id).plan()

    assert plan.notes == (
        "step 0: the manifest entry for pay.charge changed since the step ran",
        "step 2: new.tool had no manifest entry when it ran; planned with the entry in force now",
    )
    kinds = {a.step: a.to_dict().get("compensation_tool", a.kind.value) for a in plan.actions}
    assert kinds == {0: "pay.refund_v2", 1: "repo.delete", 2: "new.undo", 3: "skip"}
    assert "note: step 0: the manifest entry for pay.charge changed since the step ran" in plan.to_text()
