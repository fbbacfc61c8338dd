"""The rollback plan: what undoing a run would do, step by step, newest first. Pure: no I/O."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum

from reversi.core.checkpoints import RollbackScope
from reversi.core.json_values import JSONObject, LooseJSON, LooseJSONObject
from reversi.core.manifest import CompensationKind, Verification
from reversi.core.resources import Dependent


class ActionKind(StrEnum):
    COMPENSATE = "compensate"
    SKIP = "skip"
    UNRECOVERABLE = "unrecoverable"
    UNRESOLVED = "unresolved"
    UNMANIFESTED = "unmanifested"
    DEFER = "defer"


class Reason:
    """The fixed texts of the plan's reasons."""

    READ = "read"
    IDEMPOTENT = "idempotent"
    NEVER_TOOK_EFFECT = "never took effect"
    ALREADY_COMPENSATED = "already compensated"
    CANNOT_BE_UNDONE = "cannot be undone"
    NO_COMPENSATION = "no compensation declared"
    UNRESOLVED = "outcome unknown: reconcile with the downstream system"
    UNMANIFESTED = "no manifest entry"

    @staticmethod
    def arguments_unavailable(ref: str, why: str = "") -> str:
        return f"compensation arguments unavailable: {ref}" + (f" ({why})" if why else "")

    @staticmethod
    def values_unreadable(why: str) -> str:
        return f"its values cannot be read: {why}"

    @staticmethod
    def cannot_be_undone(what_stays: str) -> str:
        return f"{Reason.CANNOT_BE_UNDONE}: {what_stays}" if what_stays else Reason.CANNOT_BE_UNDONE

    @staticmethod
    def does_not_apply(unmet: str) -> str:
        return f"the compensation does not fit this call: {unmet}"

    @staticmethod
    def none_fits(unmet: Sequence[str]) -> str:
        return f"no compensation fits this call: {'; '.join(unmet)}"

    @staticmethod
    def window_closed(at: str) -> str:
        return f"the undo window closed at {at}"

    @staticmethod
    def approval_denied(approval_id: str) -> str:
        return f"approval {approval_id} denied: stays until someone approves it"

    @staticmethod
    def blocked_by(steps: Sequence[int], other_runs: Sequence[Dependent] = ()) -> str:
        parts = []
        if steps:
            word = "step" if len(steps) == 1 else "steps"
            parts.append(f"{word} {', '.join(str(s) for s in steps)}")
        parts += [d.describe() for d in other_runs]
        return f"blocked by {'; '.join(parts)}"


# What keeps a step standing after the rollback, whatever else happens.
LEAVES_STANDING = frozenset(
    {ActionKind.UNRESOLVED, ActionKind.UNMANIFESTED, ActionKind.UNRECOVERABLE, ActionKind.DEFER}
)


def compensation_key(run_id: str, step: int, tool: str) -> str:
    """The compensation's idempotency key: the same on every attempt and every re-run."""
    return hashlib.sha256(f"{run_id}:{step}:{tool}".encode()).hexdigest()


@dataclass(frozen=True)
class Window:
    """An undo's window as planned: when it closes (RFC 3339), how long is left then (`3d 4h`; None when
    the plan was made at no given moment), or why its moment is unknown."""

    closes: str | None
    left: str | None = None
    unknown: str | None = None

    def describe(self) -> str:
        if self.closes is None:
            return f"its undo window is unknown: {self.unknown}"
        return f"undo window closes {self.closes}" + (f", in {self.left}" if self.left else "")


@dataclass(frozen=True)
class CompensationCall:
    """The undo of one step, with its arguments resolved."""

    run_id: str
    step: int
    tool: str
    original_tool: str
    args: LooseJSON  # resolved from the entry's template
    idempotency_key: str
    kind: CompensationKind
    residue: tuple[str, ...]
    needs_approval: bool
    verification: Verification | None
    alternative: str | None = None  # which of the entry's alternatives, when it has several
    chosen_because: str | None = None
    then: tuple[tuple[str, LooseJSON], ...] = ()  # the calls after the first (tool, resolved arguments)
    declared_by: str | None = None  # the server that declared the undo (`server shop (recovery)`), if no manifest
    window: Window | None = None  # when the undo stops being possible, if its entry says

    @property
    def tools(self) -> str:
        """The tools the undo calls, in order: `write_note`, or `write_note, then move_note`."""
        return "".join([self.tool, *(f", then {tool}" for tool, _ in self.then)])

    @property
    def parts(self) -> int:
        """How many calls the undo makes."""
        return 1 + len(self.then)

    def part_json(self, part: int) -> JSONObject:
        """Call `part` of the undo as compensators receive it: for an undo of several calls, each has its
        own tool and arguments, the key with its index appended (`KEY:1`), `part` and `parts`."""
        if not self.then:
            return self.call_json()
        tool, args = (self.tool, self.args) if part == 0 else self.then[part - 1]
        key = f"{self.idempotency_key}:{part}"
        return self.call_json() | {"tool": tool, "args": args, "idempotency_key": key, "part": part,
                                   "parts": self.parts}

    def call_json(self) -> JSONObject:
        """The call as compensators receive it."""
        return {
            "run_id": self.run_id,
            "step": self.step,
            "tool": self.tool,
            "original_tool": self.original_tool,
            "args": self.args,
            "idempotency_key": self.idempotency_key,
        }


@dataclass(frozen=True)
class Action:
    """What the rollback does (or cannot do) about one step."""

    step: int
    tool: str
    kind: ActionKind
    reason: str | None = None
    compensation: CompensationCall | None = None
    blocked_by: tuple[int, ...] = ()
    blocked_by_runs: tuple[Dependent, ...] = ()  # steps of other runs that touched its resources later
    # A compensation whose approval was denied: the rollback leaves the step standing (a denial is
    # not overridden by approving pending ones), so it holds back what it depends on.
    denied_approval: str | None = None
    # A compensation tried before that failed: its last error and attempts (`its last undo failed: ...`).
    # The rollback offers it again; the plan says so, rather than look as if nothing had happened.
    last_failure: str | None = None

    @property
    def leaves_standing(self) -> bool:
        """Whether the step still stands after the rollback, assuming each compensation succeeds."""
        return self.kind in LEAVES_STANDING or self.denied_approval is not None

    def to_dict(self) -> JSONObject:
        out: JSONObject = {"step": self.step, "tool": self.tool, "kind": self.kind.value}
        comp = self.compensation
        if self.kind is ActionKind.COMPENSATE and comp is not None:
            out.update(
                compensation_tool=comp.tool,
                args=comp.args,
                idempotency_key=comp.idempotency_key,
                needs_approval=comp.needs_approval,
                residue=list(comp.residue),
                compensation_kind=comp.kind.value,
                verified=comp.verification is not None,
            )
            if comp.alternative is not None:
                out.update(alternative=comp.alternative, chosen_because=comp.chosen_because)
            if comp.declared_by is not None:
                out["declared_by"] = comp.declared_by
            if comp.window is not None:
                out["undo_until"] = comp.window.closes
                if comp.window.unknown is not None:
                    out["undo_window_unknown"] = comp.window.unknown
            if comp.then:
                out["then"] = [{"tool": tool, "args": args} for tool, args in comp.then]
            if self.denied_approval is not None:
                out["reason"] = Reason.approval_denied(self.denied_approval)
            if self.last_failure is not None:
                out["last_failure"] = self.last_failure
        else:
            out["reason"] = self.reason
        if self.kind is ActionKind.DEFER:
            out["blocked_by"] = list(self.blocked_by)
            if self.blocked_by_runs:
                out["blocked_by_runs"] = [d.to_dict() for d in self.blocked_by_runs]
        return out

    def describe(self) -> str:
        """The action's text form: `compensate -> TOOL`, or the kind and its reason."""
        if self.kind is ActionKind.COMPENSATE and self.compensation is not None:
            denied = f"  {Reason.approval_denied(self.denied_approval)}" if self.denied_approval else ""
            failed = f"  (its last undo failed: {self.last_failure}; tried again)" if self.last_failure else ""
            comp = self.compensation
            chosen = f"  ({comp.alternative}: {comp.chosen_because})" if comp.alternative is not None else ""
            declared = f"  (undo declared by {comp.declared_by})" if comp.declared_by is not None else ""
            window = f"  ({comp.window.describe()})" if comp.window is not None else ""
            return f"compensate -> {comp.tools}{chosen}{declared}{window}{denied}{failed}"
        return f"{self.kind.value}  {self.reason}" if self.reason else self.kind.value


@dataclass(frozen=True)
class Plan:
    """A dry run of the rollback: one action per step, newest first."""

    run_id: str
    actions: tuple[Action, ...]
    notes: tuple[str, ...] = field(default=())
    scope: RollbackScope | None = None  # the steps after a checkpoint, when not the whole run

    @property
    def fully_reversible(self) -> bool:
        """Every step is `compensate` or `skip` (the reference page's definition), assuming each
        compensation succeeds. A `compensate` whose approval was denied still counts: what it holds
        back is `defer`, which does not."""
        return all(a.kind in (ActionKind.COMPENSATE, ActionKind.SKIP) for a in self.actions)

    @property
    def unmanifested(self) -> bool:
        """Some step has no manifest entry (with no manifests in force, every write step)."""
        return any(a.kind is ActionKind.UNMANIFESTED for a in self.actions)

    def noting(self, note: str) -> Plan:
        """The plan with one more note."""
        return replace(self, notes=(*self.notes, note))

    def to_dict(self) -> LooseJSONObject:
        out: LooseJSONObject = {
            "run_id": self.run_id,
            "actions": [a.to_dict() for a in self.actions],
            "fully_reversible": self.fully_reversible,
            "notes": list(self.notes),
        }
        return out | ({"scope": self.scope.to_dict()} if self.scope is not None else {})

    def to_text(self) -> str:
        lines = [self.scope.describe()] if self.scope is not None else []
        lines += [f"step {a.step}  {a.tool}  {a.describe()}" for a in self.actions]
        lines += [f"note: {n}" for n in self.notes]
        lines.append("fully reversible" if self.fully_reversible else "NOT fully reversible: see above")
        return "\n".join(lines)

