"""plan_rollback: a run snapshot and the manifests in force → the plan. Pure: no I/O."""

from __future__ import annotations

from datetime import datetime

from reversi.core.checkpoints import RollbackScope
from reversi.core.gc_pause import gc_paused
from reversi.core.manifest import ManifestSet, ToolEntry
from reversi.core.models import RunSnapshot, StepState
from reversi.core.plan import Plan
from reversi.core.resources import RunLineage
from reversi.core.walk import RollbackWalk


def plan_rollback(
    snapshot: RunSnapshot,
    manifests: ManifestSet,
    scope: RollbackScope | None = None,
    lineage: RunLineage | None = None,
    now: datetime | None = None,
    *,
    deadline_first: bool = False,
) -> Plan:
    """The plan for undoing `snapshot`'s run with `manifests`: one action per step, newest first; with
    `scope`, one per step it covers (the steps after a checkpoint), the earlier ones kept unlisted.

    A step to compensate is deferred while a dependent would still stand when the rollback ends;
    deferral is transitive, and a step that needs no undo is never deferred. Every compensation
    is assumed to succeed (the rollback itself walks the same way with what really happened).
    `lineage`: what depends on its steps through the resources they touched, in it and in other runs.
    `now`: the moment undo windows are judged at (a step whose window closed is unrecoverable); None:
    windows are shown, not judged. `deadline_first`: the order of `RollbackWalk`'s.
    """
    with gc_paused():
        walk = RollbackWalk(snapshot, manifests, scope, lineage, now, deadline_first)
        actions = tuple(walk)
        notes = [note for step in walk.steps if (note := _manifest_note(step, walk.entry(step.index)))]
        return Plan(snapshot.run.run_id, actions, tuple(notes), scope)


def _manifest_note(step: StepState, entry: ToolEntry | None) -> str | None:
    recorded = step.record.manifest_digest
    if entry is None or recorded == entry.digest or not step.status.stands:
        return None
    if recorded is None:
        return f"step {step.index}: {step.tool} had no manifest entry when it ran; planned with the entry in force now"
    return f"step {step.index}: the manifest entry for {step.tool} changed since the step ran"
