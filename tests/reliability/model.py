"""A plain reference model of Reversi's rules for one run, for the state machine (test_state_machine.py).

Written from the spec (SPEC §2, §4-§6, the reference page), in plain Python with no Reversi code: what
each call, settlement, decision, halt and rollback should do, and what the downstream world (the
witness's rules: an object per create, the first `undo_fails` undos refused, one undo per key) does.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import Any

STANDS = ("succeeded", "compensating", "compensation_failed")
UNRESOLVED = ("intended", "uncertain")


@dataclass(frozen=True)
class Entry:
    """A manifest entry, restated: what the planner needs of it."""

    read: bool = False
    irreversible: bool = False
    requires: tuple[str, ...] = ()
    ask_first: bool = False  # the forward call waits for an approval
    key_arg: str | None = None  # forward duplicate protection on this argument
    undo: str | None = None
    undo_approval: bool = False


# The world's manifest (world.MANIFEST), restated. `w_misc` has no entry: unmanifested in observe mode.
MANIFEST = {
    "w_create": Entry(undo="w_delete"),
    "w_charge": Entry(undo="w_refund"),
    "w_attach": Entry(requires=("w_create",), undo="w_detach"),
    "w_guarded": Entry(undo="w_release", undo_approval=True),
    "w_notify": Entry(irreversible=True),
    "w_lookup": Entry(read=True),
    "w_ask": Entry(ask_first=True, undo="w_unask"),
    "w_order": Entry(key_arg="order", undo="w_cancel"),
}


@dataclass
class Step:
    index: int
    tool: str
    args: dict[str, Any]
    depends_on: tuple[int, ...]
    status: str
    resolved_to: str | None = None  # what an operator last settled it as (a correction may follow)


@dataclass
class Approval:
    kind: str  # call | compensation
    status: str = "pending"
    used: bool = False
    step: int | None = None
    call: tuple[str, str] | None = None  # (tool, arguments as canonical JSON) of a forward call


@dataclass
class Halt:
    """A halt's scope: globs on the call's tool and the run's actor, tenant and environment."""

    scope: dict[str, str]

    def matches(self, call: dict[str, str]) -> bool:
        return all(fnmatchcase(call[name], glob) for name, glob in self.scope.items())


@dataclass
class Report:
    compensated: list[int] = field(default_factory=list)
    skipped: list[int] = field(default_factory=list)
    unresolved: list[int] = field(default_factory=list)
    unmanifested: list[int] = field(default_factory=list)
    failed: list[tuple[int, int]] = field(default_factory=list)  # (step, attempts made)
    unrecoverable: list[int] = field(default_factory=list)
    deferred: list[tuple[int, tuple[int, ...]]] = field(default_factory=list)
    awaiting: list[tuple[int, str]] = field(default_factory=list)


class Crashed(Exception):
    """The model's rollback stopped where the state machine's compensate function crashes."""


@dataclass
class Model:
    actor: str
    tenant: str = ""
    enforce: bool = False  # the run's mode: enforce refuses tools with no manifest entry
    kill_file: bool = False  # the kill switch is on
    refused: int = 0  # refused calls, each journaled as a `refused` event
    steps: list[Step] = field(default_factory=list)
    approvals: list[Approval] = field(default_factory=list)
    halts: list[Halt] = field(default_factory=list)
    created: set[str] = field(default_factory=set)  # ops the downstream created
    undo_fails: dict[str, int] = field(default_factory=dict)  # op -> undos the downstream still refuses
    undone_keys: set[int] = field(default_factory=set)  # steps whose undo the downstream applied

    # -- recording -------------------------------------------------------------------------------

    def refusal(self, tool: str, args: dict[str, Any]) -> str | None:
        """The error a new call gets, or None (counted: each is journaled)."""
        refused = self._refusal(tool, args)
        self.refused += refused is not None
        return refused

    def _refusal(self, tool: str, args: dict[str, Any]) -> str | None:
        """SPEC §2, §6, the gateway's order: the kill file, halts, enforce mode, duplicates, approvals.
        A new approval request is made here when the call needs one and has none open."""
        scope = {"tool": tool, "actor": self.actor, "tenant": self.tenant, "environment": ""}
        if self.kill_file or any(h.matches(scope) for h in self.halts):
            return "Halted"
        entry = MANIFEST.get(tool)
        if entry is None and self.enforce:
            return "NoManifestEntry"
        if entry is not None and entry.key_arg is not None and entry.key_arg in args:
            for step in self.steps:
                same = step.tool == tool and step.args.get(entry.key_arg) == args[entry.key_arg]
                if same and (step.status in STANDS or step.status in UNRESOLVED):
                    return "Duplicate"
        if entry is not None and entry.ask_first:
            call = (tool, json.dumps(args, sort_keys=True))
            open_ = [a for a in self.approvals if a.kind == "call" and a.call == call and not a.used]
            if not open_:
                self.approvals.append(Approval("call", call=call))
                return "ApprovalRequired"
            latest = open_[-1]
            if latest.status == "denied":
                return "ApprovalDenied"
            if latest.status == "pending":
                return "ApprovalRequired"
            latest.used = True
        return None

    def record(self, tool: str, args: dict[str, Any], depends_on: tuple[int, ...], outcome: str) -> str | int:
        """A call made with this outcome (`succeeded`, `uncertain`: the caller gave up after the call ran,
        `failed`: the caller's own error before it, `intended`: the caller crashed before it reported);
        its refusal, or its step number."""
        refused = self.refusal(tool, args)
        if refused is not None:
            return refused
        op = args["op"]
        read = MANIFEST.get(tool, Entry()).read
        status = outcome
        if outcome in ("succeeded", "uncertain"):
            if read:
                pass
            elif op in self.created:  # the downstream refuses a second create of one object
                status = "failed"
            else:
                self.created.add(op)
                self.undo_fails[op] = int(args.get("undo_fails", 0))
        self.steps.append(Step(len(self.steps), tool, args, depends_on, status))
        return len(self.steps) - 1

    def resolve(self, index: int) -> str | None:
        """An operator settles a step as the downstream says it went; the error, if it may not be."""
        step = self.steps[index]
        if step.status not in UNRESOLVED and step.status != step.resolved_to:  # settled by hand: corrected
            return "Conflict"
        step.status = step.resolved_to = "succeeded" if step.args["op"] in self.created else "failed"
        return None

    # -- decisions -------------------------------------------------------------------------------

    def decide(self, index: int, approve: bool) -> str | None:
        """Approve or deny approval `index` (in the order they were asked for); the error, if any."""
        approval = self.approvals[index]
        if approval.status == "approved" and approval.used:
            return "Conflict"
        approval.status = "approved" if approve else "denied"
        return None

    # -- plan and rollback -----------------------------------------------------------------------

    def plan(self) -> list[tuple[int, str, tuple[int, ...]]]:
        """The dry run: (step, kind, blocked_by) newest first, each compensation assumed to succeed; an
        undo whose approval was denied still stands, and holds back what it depends on."""
        found: list[tuple[int, str, tuple[int, ...]]] = []
        standing: set[int] = set()
        kinds = {"skipped": "skip", "unresolved": "unresolved", "unmanifested": "unmanifested",
                 "unrecoverable": "unrecoverable"}
        for step in reversed(self.steps):
            kind = self._classify(step)
            blocked: tuple[int, ...] = ()
            if kind == "compensate":
                blocked = tuple(sorted(d for d in self._dependents(step) if d in standing))
                if blocked:
                    kind = "defer"
                elif self._denied(step):
                    standing.add(step.index)
            found.append((step.index, kinds.get(kind, kind), blocked))
            if kind not in ("compensate", "skipped"):
                standing.add(step.index)
        return found

    def _denied(self, step: Step) -> bool:
        """Whether the step's undo needs an approval and its latest request was denied."""
        asked = [a for a in self.approvals if a.kind == "compensation" and a.step == step.index]
        return bool(asked) and MANIFEST[step.tool].undo_approval and asked[-1].status == "denied"

    def rollback(self, approve_pending: bool, attempts: int, crash_at: int | None, crash_after: bool) -> Report:
        """Newest first, dependencies and approvals applied (reference page, SPEC §4-§5). The `crash_at`-th
        compensation call crashes the rollback, before or after the downstream applies it: Crashed."""
        report = Report()
        standing: set[int] = set()
        calls = 0
        for step in reversed(self.steps):
            kind = self._classify(step)
            if kind == "compensate":
                blocked = tuple(sorted(d for d in self._dependents(step) if d in standing))
                if blocked:
                    report.deferred.append((step.index, blocked))
                    standing.add(step.index)
                    continue
                approval = self._undo_approval(step, approve_pending)
                if approval is not None and approval.status != "approved":
                    report.awaiting.append((step.index, approval.status))
                    standing.add(step.index)
                    continue
                undone = False
                for _ in range(attempts):
                    calls += 1
                    step.status = "compensating"
                    if approval is not None:
                        approval.used = True
                    if calls == crash_at and not crash_after:
                        raise Crashed()
                    if self._downstream_undo(step) and calls == crash_at:
                        raise Crashed()
                    if step.index in self.undone_keys:
                        undone = True
                        break
                    step.status = "compensation_failed"
                if undone:
                    step.status = "compensated"
                    report.compensated.append(step.index)
                else:
                    report.failed.append((step.index, attempts))
                    standing.add(step.index)
                continue
            getattr(report, kind).append(step.index)
            if kind != "skipped":
                standing.add(step.index)
        return report

    def _classify(self, step: Step) -> str:
        entry = MANIFEST.get(step.tool)
        if step.status in ("failed", "compensated"):
            return "skipped"
        if step.status in UNRESOLVED:
            return "unresolved"
        if entry is None:
            return "unmanifested"
        if entry.read:
            return "skipped"
        if entry.irreversible or entry.undo is None:
            return "unrecoverable"
        return "compensate"

    def _dependents(self, target: Step) -> list[int]:
        """Later steps that depend on `target`: by `depends_on`, or by their tool's `requires`."""
        found = []
        for later in self.steps[target.index + 1:]:
            globs = MANIFEST.get(later.tool, Entry()).requires
            if target.index in later.depends_on or any(fnmatchcase(target.tool, g) for g in globs):
                found.append(later.index)
        return found

    def _undo_approval(self, step: Step, approve_pending: bool) -> Approval | None:
        if not MANIFEST[step.tool].undo_approval:
            return None
        found = [a for a in self.approvals if a.kind == "compensation" and a.step == step.index]
        if not found:
            self.approvals.append(Approval("compensation", step=step.index))
            found = self.approvals[-1:]
        approval = found[-1]
        if approve_pending and approval.status == "pending":
            approval.status = "approved"
        return approval

    def _downstream_undo(self, step: Step) -> bool:
        """One call of the step's undo downstream: True when it was applied (now or before)."""
        op = step.args["op"]
        if step.index in self.undone_keys:
            return True
        if self.undo_fails.get(op, 0) > 0:
            self.undo_fails[op] -= 1
            return False
        self.undone_keys.add(step.index)
        return True
