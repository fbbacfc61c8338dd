"""Retention's one rule: which runs older than the window may be pruned, and why the others are kept.
Pure: no I/O.

A run may go when it was opened before the cutoff (now minus the window), nothing was journaled in
it since, and nothing about it is still open:

* every step is settled: `compensated`, `failed` (it never took effect), or `succeeded` with nothing
  to undo by the plan (the rollback walk's `skip`: a read, an idempotent call, a dry run under
  `read_when`);
* no step is unresolved (`intended`, `uncertain`), being undone (`compensating`, which is also where a
  remote worker's claim lives), or standing with an undo to run or none possible (`succeeded` that
  the plan would compensate, defer, or cannot undo; `compensation_failed`);
* no approval of the run is pending, no rollback job of it is queued or running, and no rollback
  holds its lease.

Anything else keeps the run, with each reason (`Hold`). A step that cannot be undone (irreversible,
no compensation declared, no manifest entry) stands: its run is kept, as the journal is the only
record that its effect is still in the world.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from reversi.core.json_values import JSONObject
from reversi.core.manifest import ManifestSet
from reversi.core.models import RunRecord, RunSnapshot, StepState, StepStatus
from reversi.core.plan import Action, ActionKind
from reversi.core.times import format_time, parse_time
from reversi.core.walk import RollbackWalk

_STEPS_NAMED = 5  # a reason names this many steps, then says how many more


class HoldKind(StrEnum):
    """Why a run older than the window is kept."""

    STANDING = "standing"
    UNRESOLVED = "unresolved"
    COMPENSATING = "compensating"
    APPROVAL_PENDING = "approval_pending"
    ROLLBACK_JOB = "rollback_job"
    ROLLBACK_LEASE = "rollback_lease"
    RECENT = "recent"


_TEXTS = {
    HoldKind.STANDING: "{steps} still {verb}",
    HoldKind.UNRESOLVED: "{steps}: outcome unknown",
    HoldKind.COMPENSATING: "{steps}: being undone",
    HoldKind.APPROVAL_PENDING: "an approval is pending",
    HoldKind.ROLLBACK_JOB: "a rollback job is queued or running",
    HoldKind.ROLLBACK_LEASE: "a rollback holds the run",
    HoldKind.RECENT: "journaled in since the cutoff",
}


@dataclass(frozen=True)
class Hold:
    """One reason to keep a run: its kind, and the steps it is about (newest first), if any."""

    kind: HoldKind
    steps: tuple[int, ...] = ()

    @property
    def text(self) -> str:
        named = ", ".join(str(s) for s in self.steps[:_STEPS_NAMED])
        more = len(self.steps) - _STEPS_NAMED
        steps = ("step " if len(self.steps) == 1 else "steps ") + named + (f" and {more} more" if more > 0 else "")
        return _TEXTS[self.kind].format(steps=steps, verb="stands" if len(self.steps) == 1 else "stand")

    def to_dict(self) -> JSONObject:
        return {"kind": self.kind.value, "steps": list(self.steps), "text": self.text}


@dataclass(frozen=True)
class RetentionFacts:
    """What retention reads about one run, beside its snapshot: the time of its last event, and
    whether an approval is pending, a rollback job unfinished, a rollback lease held."""

    snapshot: RunSnapshot
    last_event_at: str | None = None
    approval_pending: bool = False
    rollback_job: bool = False
    rollback_lease: bool = False

    @property
    def run(self) -> RunRecord:
        return self.snapshot.run


def cutoff(now: datetime, window: timedelta) -> str | None:
    """`now - window` as the ledger writes times; None when that is before the calendar begins
    (nothing is that old)."""
    try:
        return format_time(now - window)
    except OverflowError:
        return None


def holds(facts: RetentionFacts, manifests: ManifestSet, before: str) -> tuple[Hold, ...]:
    """Why the run of `facts`, opened before `before` (a cutoff), must be kept; empty when it may go."""
    found: list[Hold] = []
    by_kind: dict[HoldKind, list[int]] = {}
    for action in RollbackWalk(facts.snapshot, manifests):
        kind = _step_hold(facts.snapshot.step(action.step), action)
        if kind is not None:
            by_kind.setdefault(kind, []).append(action.step)
    for kind in (HoldKind.UNRESOLVED, HoldKind.COMPENSATING, HoldKind.STANDING):
        if kind in by_kind:
            found.append(Hold(kind, tuple(by_kind[kind])))
    for kind, held in ((HoldKind.APPROVAL_PENDING, facts.approval_pending), (HoldKind.ROLLBACK_JOB, facts.rollback_job),
                       (HoldKind.ROLLBACK_LEASE, facts.rollback_lease)):
        if held:
            found.append(Hold(kind))
    if facts.last_event_at is not None and not _earlier(facts.last_event_at, before):
        found.append(Hold(HoldKind.RECENT))
    return tuple(found)


def _step_hold(step: StepState, action: Action) -> HoldKind | None:
    """What keeps one step's run, if anything: by its derived status, and by the walk for a step
    that succeeded."""
    status = step.status
    if status in (StepStatus.FAILED, StepStatus.COMPENSATED):
        return None
    if status.unresolved:
        return HoldKind.UNRESOLVED
    if status is StepStatus.COMPENSATING:
        return HoldKind.COMPENSATING
    if status is StepStatus.SUCCEEDED and action.kind is ActionKind.SKIP:
        return None
    return HoldKind.STANDING


def _earlier(at: str, before: str) -> bool:
    return parse_time(at) < parse_time(before)


def texts(found: Sequence[Hold]) -> str:
    """The reasons as one line: `step 2 still stands; an approval is pending`."""
    return "; ".join(h.text for h in found)
