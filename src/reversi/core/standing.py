"""Where a run stands, across every rollback that touched it: one view from the journal. Pure: no I/O.

For each step: its status; when it is undone, who undid it (actor, principal, the job when a job
did), when, after how many attempts, and what its read-back said; when it still stands, why (the
plan's reason) and what to do next. Steps are grouped by that next action, so an operator sees in one
place what is done, what is left, and what each group of what is left needs.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

from reversi.core.json_values import JSONObject, LooseJSONObject
from reversi.core.models import Event, EventType, RunSnapshot, StepStatus
from reversi.core.plan import Action, ActionKind, Plan

__all__ = ["Next", "RunStanding", "StepStanding", "run_standing"]


class Next(StrEnum):
    """What a step that still stands needs next."""

    ROLL_BACK = "roll back"  # nothing holds it: a rollback undoes it
    RETRY = "fix and retry"  # its undo failed: fix the cause, roll back again (same idempotency key)
    APPROVE = "approve"  # its undo's approval was denied: it stays until someone approves it
    RESOLVE = "resolve"  # its outcome is unknown: check the downstream system and settle it
    UNDO_FIRST = "undo what holds it back"  # a later step (of this run or another) stands on it
    ACCEPT = "accept what stays"  # it cannot be undone (or has no manifest entry): accept it, or declare an undo


_ADVICE = {
    Next.ROLL_BACK: "roll the run back",
    Next.RETRY: "fix what made the undo fail, then roll back again: it is retried with the same idempotency key",
    Next.APPROVE: "approve its compensation (it was denied), then roll back again",
    Next.RESOLVE: "check the downstream system, then resolve the step (succeeded with its result, or failed)",
    Next.UNDO_FIRST: "undo the steps that hold it back first (listed with it)",
    Next.ACCEPT: "accept what stays, or declare an undo in the manifest and plan again",
}


@dataclass(frozen=True)
class StepStanding:
    """One step as the journal leaves it."""

    step: int
    tool: str
    status: StepStatus
    undone: LooseJSONObject | None = None  # by, principal, job, at, attempts, read_back
    remains: str | None = None  # why it still stands
    next: Next | None = None
    attempts: int = 0
    last_error: str | None = None

    def to_dict(self) -> JSONObject:
        out: JSONObject = {"step": self.step, "tool": self.tool, "status": self.status.value}
        if self.undone is not None:
            out["undone"] = self.undone
        if self.remains is not None:
            out |= {"remains": self.remains, "next": self.next.value if self.next else None}
        if self.attempts:
            out["attempts"] = self.attempts
        if self.last_error:
            out["last_error"] = self.last_error
        return out


@dataclass(frozen=True)
class RunStanding:
    """Every step of a run as the journal leaves it, and what each group of what is left needs."""

    run_id: str
    steps: tuple[StepStanding, ...]

    @property
    def undone(self) -> list[StepStanding]:
        return [s for s in self.steps if s.undone is not None]

    @property
    def left(self) -> list[StepStanding]:
        return [s for s in self.steps if s.next is not None]

    def groups(self) -> dict[Next, list[int]]:
        found: dict[Next, list[int]] = {}
        for s in self.left:
            assert s.next is not None
            found.setdefault(s.next, []).append(s.step)
        return found

    def to_dict(self) -> JSONObject:
        return {
            "steps": [s.to_dict() for s in self.steps],
            "next": [{"do": n.value, "steps": list(steps), "how": _ADVICE[n]} for n, steps in self.groups().items()],
        }

    def to_text(self) -> str:
        lines = []
        for s in self.undone:
            assert s.undone is not None
            u = s.undone
            who = u["by"] + (f" (job {u['job']})" if u.get("job") else "")
            check = f", read-back {u['read_back']}" if u.get("read_back") else ""
            lines.append(f"step {s.step}  {s.tool}  undone by {who} at {u['at']}, {_attempts(u['attempts'])}{check}")
        for s in self.left:
            assert s.next is not None
            error = f" (last error: {s.last_error})" if s.last_error else ""
            lines.append(f"step {s.step}  {s.tool}  stands: {s.remains}{error}  -> {s.next.value}")
        for n, steps in self.groups().items():
            lines.append(f"next: {n.value} (step{'s' if len(steps) > 1 else ''} {', '.join(map(str, steps))}): "
                         f"{_ADVICE[n]}")
        return "\n".join(lines) if lines else "nothing undone, nothing left to undo"


def _attempts(n: int) -> str:
    return "1 attempt" if n == 1 else f"{n} attempts"


def run_standing(snapshot: RunSnapshot, events: Iterable[Event], plan: Plan) -> RunStanding:
    """The run's standing from its journal (`events`) and its rollback plan as things are now."""
    undone: dict[int, LooseJSONObject] = {}
    for e in events:
        if e.step is None:
            continue
        if e.type == EventType.COMPENSATED:
            data = e.data
            undone[e.step] = {"by": e.actor, "principal": data.get("principal"), "job": data.get("job"), "at": e.at,
                              "attempts": int(data.get("attempts", 1)), "read_back": None}
        elif e.type in (EventType.VERIFIED, EventType.UNVERIFIED) and e.step in undone:
            undone[e.step]["read_back"] = "verified" if e.type == EventType.VERIFIED else "not run"
    actions = {a.step: a for a in plan.actions}
    out = []
    for step in snapshot.steps:
        action = actions.get(step.index)
        if step.status is StepStatus.COMPENSATED:
            out.append(StepStanding(step.index, step.tool, step.status, undone=undone.get(step.index)))
            continue
        left = _next(step.status, action) if action is not None else None
        remains = _why(step.status, action) if left is not None and action is not None else None
        out.append(StepStanding(step.index, step.tool, step.status, remains=remains, next=left,
                                attempts=step.attempts, last_error=step.last_error))
    return RunStanding(snapshot.run.run_id, tuple(out))


def _next(status: StepStatus, action: Action) -> Next | None:
    kind = action.kind
    if kind is ActionKind.SKIP:
        return None
    if kind is ActionKind.UNRESOLVED:
        return Next.RESOLVE
    if kind is ActionKind.DEFER:
        return Next.UNDO_FIRST
    if kind in (ActionKind.UNRECOVERABLE, ActionKind.UNMANIFESTED):
        return Next.ACCEPT
    if action.denied_approval is not None:
        return Next.APPROVE
    return Next.RETRY if status in (StepStatus.COMPENSATION_FAILED, StepStatus.COMPENSATING) else Next.ROLL_BACK


def _why(status: StepStatus, action: Action) -> str:
    if action.kind is ActionKind.COMPENSATE:
        if status is StepStatus.COMPENSATION_FAILED:
            return "its undo failed"
        if status is StepStatus.COMPENSATING:
            return "its undo was begun and not finished"
        return "not undone yet" if action.denied_approval is None else "its compensation approval was denied"
    return action.describe()
