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

import pytest
from hypothesis import HealthCheck, given, settings
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


def model(
    steps: list[dict[str, Any]], failing: frozenset[int] = frozenset()
) -> dict[int, tuple[ActionKind, tuple[int, ...]]]:
    """Each step's expected kind and `blocked_by`, when the undo of each step in `failing` fails (a
    step whose undo fails still stands, like one that cannot be undone)."""
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
    failed: set[int] = set()
    for t in reversed(range(n)):
        kind = base_kind(steps[t]["tool"], steps[t]["status"], steps[t]["has_id"])
        blocked: tuple[int, ...] = ()
        if kind is ActionKind.COMPENSATE:
            blocked = tuple(sorted(s for s in dependents[t] if final[s][0] in STANDING_KINDS or s in failed))
            if blocked:
                kind = ActionKind.DEFER
            elif t in failing:
                failed.add(t)
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


# -- the executor walks as the planner does ----------------------------------------------------------

RECORDABLE = [StepStatus.SUCCEEDED, StepStatus.FAILED, StepStatus.INTENDED, StepStatus.UNCERTAIN]


@st.composite
def recordable_runs(draw: st.DrawFn) -> tuple[list[dict[str, Any]], frozenset[int]]:
    """A run whose steps the SDK can record as they are, and which of their undos will fail."""
    steps = draw(runs())
    for s in steps:
        s["status"] = draw(st.sampled_from(RECORDABLE))
    failing = draw(st.sets(st.integers(0, max(len(steps) - 1, 0)))) if steps else set()
    return steps, frozenset(failing)


def record(ledger: reversi.Ledger, steps: list[dict[str, Any]]) -> reversi.Run:
    run = ledger.start_run()
    for i, s in enumerate(steps):
        handle = run.begin(s["tool"], {"name": f"n{i}", "path": f"p{i}"}, depends_on=s["depends_on"])
        if s["status"] is StepStatus.SUCCEEDED:
            handle.succeeded({"id": f"r{i}"} if s["has_id"] else {"other": i})
        elif s["status"] is StepStatus.FAILED:
            handle.failed("declined")
        elif s["status"] is StepStatus.UNCERTAIN:
            handle.uncertain("timed out")
    return run


def roll_back(run: reversi.Run, failing: frozenset[int]) -> tuple[reversi.RollbackReport, list[int]]:
    """Roll `run` back with a compensator that fails for the steps in `failing`; returns the report
    and the steps whose undo it was asked for, in order."""
    asked: list[int] = []

    def compensate(call: dict[str, Any]) -> dict[str, Any]:
        asked.append(call["step"])
        if call["step"] in failing:
            raise RuntimeError("downstream said no")
        return {"ok": True}

    return run.rollback(compensate), asked


def by_kind(report: reversi.RollbackReport) -> dict[int, tuple[ActionKind, tuple[int, ...]]]:
    """The report's verdict per step, in the plan's kinds (a compensation that failed is `failed`)."""
    out: dict[int, tuple[ActionKind, tuple[int, ...]]] = {}
    out.update({s: (ActionKind.COMPENSATE, ()) for s in report.compensated})
    out.update({s: (ActionKind.SKIP, ()) for s in report.skipped})
    out.update({s: (ActionKind.UNRESOLVED, ()) for s in report.unresolved})
    out.update({s: (ActionKind.UNMANIFESTED, ()) for s in report.unmanifested})
    out.update({u.step: (ActionKind.UNRECOVERABLE, ()) for u in report.unrecoverable})
    out.update({d.step: (ActionKind.DEFER, d.blocked_by) for d in report.deferred})
    out.update({f.step: (ActionKind.COMPENSATE, ()) for f in report.failed})
    return out


@pytest.fixture(scope="module")
def manifest_path(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("manifest") / "tools.yaml"
    path.write_text(MANIFEST)
    return str(path)


# A fresh run per example in the test's one store (the fixture is not reset between examples).
EXECUTOR_SETTINGS = settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@EXECUTOR_SETTINGS
@given(recordable_runs())
def test_with_every_undo_succeeding_the_rollback_does_exactly_what_the_plan_said(
    db_url: str, manifest_path: str, drawn: tuple[list[dict[str, Any]], frozenset[int]]
) -> None:
    steps, _ = drawn
    with reversi.open(db_url, manifests=[manifest_path]) as ledger:
        run = record(ledger, steps)
        plan = run.plan()
        report, asked = roll_back(run, frozenset())

    planned = {a.step: (a.kind, a.blocked_by) for a in plan.actions}
    assert by_kind(report) == planned
    assert asked == [a.step for a in plan.actions if a.kind is ActionKind.COMPENSATE], "newest first, as planned"
    assert report.complete == (plan.fully_reversible and not any(k is ActionKind.DEFER for k, _ in planned.values()))


@EXECUTOR_SETTINGS
@given(recordable_runs())
def test_with_undos_failing_the_rollback_defers_what_the_rules_defer_after_those_failures(
    db_url: str, manifest_path: str, drawn: tuple[list[dict[str, Any]], frozenset[int]]
) -> None:
    steps, failing = drawn
    with reversi.open(db_url, manifests=[manifest_path]) as ledger:
        run = record(ledger, steps)
        report, asked = roll_back(run, failing)
        replan = run.plan()

    expected = model(steps, failing)
    assert by_kind(report) == expected
    assert sorted(f.step for f in report.failed) == sorted(s for s in asked if s in failing)
    assert set(report.compensated) == {s for s in asked if s not in failing}
    # What stays behind is what a re-plan still has to do: the failed undos, and what they hold back.
    still_to_do = {a.step for a in replan.actions if a.kind in (ActionKind.COMPENSATE, ActionKind.DEFER)}
    assert still_to_do == {f.step for f in report.failed} | {d.step for d in report.deferred}
