"""plan_rollback: a run snapshot and the manifests in force → the plan. Pure: no I/O."""

from __future__ import annotations

from dataclasses import replace

from reversi.core.dependencies import Blockers
from reversi.core.gc_pause import gc_paused
from reversi.core.manifest import Effect, ManifestSet, ToolEntry
from reversi.core.models import RunSnapshot, StepState, StepStatus
from reversi.core.plan import Action, ActionKind, CompensationCall, Plan, Reason, compensation_key
from reversi.core.references import MissingReference, ReferenceContext, RunContext, resolve

# Kinds whose step is still standing when the rollback ends, so its dependencies must stay too.


def reference_context(snapshot: RunSnapshot, step: StepState) -> ReferenceContext:
    run = snapshot.run
    return ReferenceContext(
        args=step.args,
        result=step.result if step.has_result else None,
        run=RunContext(run.run_id, run.scope.actor, run.scope.tenant, run.scope.environment),
        step=step.index,
    )


def classify(snapshot: RunSnapshot, step: StepState, entry: ToolEntry | None) -> Action:
    """The action for one step, before dependencies are taken into account."""
    index, tool = step.index, step.tool
    if step.status is StepStatus.FAILED:
        return Action(index, tool, ActionKind.SKIP, Reason.NEVER_TOOK_EFFECT)
    if step.status is StepStatus.COMPENSATED:
        return Action(index, tool, ActionKind.SKIP, Reason.ALREADY_COMPENSATED)
    if step.status.unresolved:
        return Action(index, tool, ActionKind.UNRESOLVED, Reason.UNRESOLVED)
    if entry is None:
        return Action(index, tool, ActionKind.UNMANIFESTED, Reason.UNMANIFESTED)
    if entry.effect is Effect.READ:
        return Action(index, tool, ActionKind.SKIP, Reason.READ)
    if entry.idempotent:
        return Action(index, tool, ActionKind.SKIP, Reason.IDEMPOTENT)
    if entry.irreversible:
        return Action(index, tool, ActionKind.UNRECOVERABLE, Reason.CANNOT_BE_UNDONE)
    comp = entry.compensation
    if comp is None:
        return Action(index, tool, ActionKind.UNRECOVERABLE, Reason.NO_COMPENSATION)
    try:
        args = resolve(dict(comp.args), reference_context(snapshot, step))
    except MissingReference as missing:
        return Action(index, tool, ActionKind.UNRECOVERABLE, Reason.arguments_unavailable(missing.ref))
    call = CompensationCall(
        run_id=snapshot.run.run_id,
        step=index,
        tool=comp.tool,
        original_tool=tool,
        args=args,
        idempotency_key=compensation_key(snapshot.run.run_id, index, comp.tool),
        kind=comp.kind,
        residue=comp.residue,
        needs_approval=_needs_approval(step, comp.requires_approval),
        verification=entry.verification,
    )
    return Action(index, tool, ActionKind.COMPENSATE, compensation=call)


def _needs_approval(step: StepState, required_now: bool) -> bool:
    """Whether the step's undo waits for an approval: as snapshotted when the step ran, so a later edit
    of the manifest changes nothing for it; the manifest in force only for a step that ran without
    an entry (there was nothing to snapshot)."""
    if step.record.manifest_digest is not None:
        return step.record.compensation_needs_approval
    return required_now


def blockers_for(snapshot: RunSnapshot, manifests: ManifestSet) -> Blockers:
    requires = []
    for step in snapshot.steps:
        entry = manifests.lookup(step.tool)
        requires.append(entry.requires if entry is not None else ())
    return Blockers([s.record.depends_on for s in snapshot.steps], requires)


def defer(action: Action, blocked_by: tuple[int, ...]) -> Action:
    return Action(
        action.step, action.tool, ActionKind.DEFER, Reason.blocked_by(blocked_by), action.compensation, blocked_by
    )


def plan_rollback(snapshot: RunSnapshot, manifests: ManifestSet) -> Plan:
    """The plan for undoing `snapshot`'s run with `manifests`: one action per step, newest first.

    A step to compensate is deferred while a dependent would still stand when the rollback ends;
    deferral is transitive, and a step that needs no undo is never deferred.
    """
    with gc_paused():
        return _plan(snapshot, manifests)


def _plan(snapshot: RunSnapshot, manifests: ManifestSet) -> Plan:
    blockers = blockers_for(snapshot, manifests)
    actions = []
    notes = []
    for step in reversed(snapshot.steps):
        entry = manifests.lookup(step.tool)
        action = classify(snapshot, step, entry)
        if action.kind is ActionKind.COMPENSATE:
            blocked_by = blockers.blocked_by(step.index, step.tool)
            if blocked_by:
                action = defer(action, blocked_by)
            elif step.denied_approval is not None and action.compensation and action.compensation.needs_approval:
                action = replace(action, denied_approval=step.denied_approval)
        if action.leaves_standing:
            blockers.stands(step.index)
        actions.append(action)
        note = _manifest_note(step, entry)
        if note:
            notes.append(note)
    notes.reverse()
    return Plan(snapshot.run.run_id, tuple(actions), tuple(notes))


def _manifest_note(step: StepState, entry: ToolEntry | None) -> str | None:
    recorded = step.record.manifest_digest
    if entry is None or recorded == entry.digest or not step.status.stands:
        return None
    if recorded is None:
        return f"step {step.index}: {step.tool} had no manifest entry when it ran; planned with the entry in force now"
    return f"step {step.index}: the manifest entry for {step.tool} changed since the step ran"
