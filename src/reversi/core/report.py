"""The rollback report: what was done, and everything that was not, with why. Pure: no I/O."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import NotRequired, TypedDict

from reversi.core.checkpoints import RollbackScope
from reversi.core.json_values import JSONObject, LooseJSONObject
from reversi.core.resources import Dependent


@dataclass(frozen=True)
class Failure:
    step: int
    error: str
    attempts: int

    def to_dict(self) -> JSONObject:
        return {"step": self.step, "error": self.error, "attempts": self.attempts}


@dataclass(frozen=True)
class Unrecoverable:
    step: int
    reason: str

    def to_dict(self) -> JSONObject:
        return {"step": self.step, "reason": self.reason}


@dataclass(frozen=True)
class Deferred:
    step: int
    blocked_by: tuple[int, ...]
    blocked_by_runs: tuple[Dependent, ...] = ()  # steps of other runs that touched its resources later

    def to_dict(self) -> JSONObject:
        out: JSONObject = {"step": self.step, "blocked_by": list(self.blocked_by)}
        return out | ({"blocked_by_runs": [d.to_dict() for d in self.blocked_by_runs]} if self.blocked_by_runs else {})


@dataclass(frozen=True)
class AwaitingApproval:
    step: int
    approval_id: str
    status: str

    def to_dict(self) -> JSONObject:
        return {"step": self.step, "approval_id": self.approval_id, "status": self.status}


class ReportJSON(TypedDict):
    """A rollback report as JSON (`RollbackReport.to_dict`): the HTTP API's, the CLI's `--json`."""

    run_id: str
    compensated: list[int]
    skipped: list[int]
    unresolved: list[int]
    unmanifested: list[int]
    unverified: list[int]
    failed: list[JSONObject]
    unrecoverable: list[JSONObject]
    deferred: list[JSONObject]
    awaiting_approval: list[JSONObject]
    already_undone: list[int]
    complete: bool
    scope: NotRequired[JSONObject]
    follow_ups: NotRequired[list[LooseJSONObject]]
    settled: NotRequired[bool]


@dataclass
class RollbackReport:
    """The outcome of one rollback. `complete` is true only when nothing is left standing or unchecked."""

    run_id: str
    compensated: list[int] = field(default_factory=list)
    skipped: list[int] = field(default_factory=list)
    unresolved: list[int] = field(default_factory=list)
    unmanifested: list[int] = field(default_factory=list)
    unverified: list[int] = field(default_factory=list)
    failed: list[Failure] = field(default_factory=list)
    unrecoverable: list[Unrecoverable] = field(default_factory=list)
    deferred: list[Deferred] = field(default_factory=list)
    awaiting_approval: list[AwaitingApproval] = field(default_factory=list)
    # Of `skipped`: the steps found compensated already (by an earlier rollback or a remote worker),
    # told apart from those that never needed an undo.
    already_undone: list[int] = field(default_factory=list)
    lines: list[str] = field(default_factory=list, repr=False)
    scope: RollbackScope | None = None  # the steps after a checkpoint, when not the whole run
    # The follow-ups of the steps it leaves in the world (`reversi.core.follow_ups`), as dicts.
    follow_ups: list[LooseJSONObject] = field(default_factory=list)

    @property
    def staying(self) -> dict[int, str]:
        """The steps it leaves in the world for people to take care of, and why: those that cannot be
        undone, whose undo failed (a remote worker's claim, 0 attempts, is no failure yet) or was denied."""
        stays = {u.step: u.reason for u in self.unrecoverable}
        stays |= {f.step: f"its undo failed: {f.error}" for f in self.failed if f.attempts}
        return stays | {a.step: f"the approval of its undo ({a.approval_id}) was denied"
                        for a in self.awaiting_approval if a.status == "denied"}

    @property
    def settled(self) -> bool:
        """Not complete, but every step it leaves in the world has a closed follow-up, and nothing is
        unknown, held back or waiting: what stays was taken care of by people."""
        waiting = any(a.status != "denied" for a in self.awaiting_approval) or any(not f.attempts for f in self.failed)
        closed = {f["step"] for f in self.follow_ups if f.get("status") == "closed"}
        return (not self.complete and not (self.unresolved or self.unmanifested or self.deferred or waiting
                                           or self.unverified) and set(self.staying) <= closed)

    @property
    def complete(self) -> bool:
        return not (
            self.failed
            or self.unrecoverable
            or self.unresolved
            or self.unmanifested
            or self.deferred
            or self.awaiting_approval
            or self.unverified
        )

    def in_walk_order(self, order: Mapping[int, int] | None = None) -> None:
        """Put every list, and the steps' lines, in the walk's order: `order` gives each step's place
        (None: newest first, the default walk's). For a rollback that undid several steps at once and
        finished them as they came, so that it reports in the order one at a time would."""

        def place(step: int | None) -> int:
            if step is None:
                return 1 << 62  # a line of no step: after the steps'
            return order.get(step, -step) if order is not None else -step

        for steps in (self.compensated, self.skipped, self.unresolved, self.unmanifested, self.unverified,
                      self.already_undone):
            steps.sort(key=place)
        for items in (self.failed, self.unrecoverable, self.deferred, self.awaiting_approval):
            items.sort(key=lambda item: place(item.step))
        self.lines.sort(key=lambda line: place(_step_of_line(line)))

    def to_dict(self) -> ReportJSON:
        out = ReportJSON(
            run_id=self.run_id,
            compensated=list(self.compensated),
            skipped=list(self.skipped),
            unresolved=list(self.unresolved),
            unmanifested=list(self.unmanifested),
            unverified=list(self.unverified),
            failed=[f.to_dict() for f in self.failed],
            unrecoverable=[u.to_dict() for u in self.unrecoverable],
            deferred=[d.to_dict() for d in self.deferred],
            awaiting_approval=[a.to_dict() for a in self.awaiting_approval],
            already_undone=list(self.already_undone),
            complete=self.complete,
        )
        if self.scope is not None:
            out["scope"] = self.scope.to_dict()
        if self.follow_ups:
            out["follow_ups"] = list(self.follow_ups)
            out["settled"] = self.settled
        return out

    def to_text(self, read_back_hint: str = "") -> str:
        """One line per step, then the verdict. `read_back_hint` says how to run the declared read-backs
        next time, in the caller's terms (the CLI: `pass --reader-cmd`)."""
        out = ([self.scope.describe()] if self.scope is not None else []) + self.lines
        if self.unverified:
            steps = ", ".join(str(s) for s in self.unverified)
            hint = f"; {read_back_hint}" if read_back_hint else ""
            out.append(f"undone but not verified (declared read-back not run{hint}): {steps}")
        out.append("rollback complete" if self.complete else "rollback INCOMPLETE")
        return "\n".join(out)


def _step_of_line(line: str) -> int | None:
    """The step a report line is of (`step N  ...`); None for another line."""
    words = line.split(maxsplit=2)
    return int(words[1]) if len(words) > 1 and words[0] == "step" and words[1].isdigit() else None
