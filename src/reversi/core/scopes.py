"""Rollbacks of many runs: which runs and steps an incident covers, and its one plan. Pure: no I/O.

A `Selection` picks runs of the tenant by who ran them (`actor`, `key`: the principal that opened
them, `tenant`, `labels`) and, within them, steps by tool glob and time window (`tool`, `since`,
`until`: a `RollbackScope` applied to each run). Its plan is one walk of every covered step, newest
first across runs in journal order (the time each step was journaled `intended`), honouring the
dependencies within each run and the resources they share across runs (`reversi.core.resources`): a
step is deferred while a dependent, in any run, will still stand when the rollback ends. Steps the
selection leaves out are kept, and hold back what they depend on while they stand.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from reversi.core.checkpoints import RollbackScope
from reversi.core.json_values import JSONObject, LooseJSON, LooseJSONObject
from reversi.core.manifest import ManifestSet
from reversi.core.models import RunRecord, RunSnapshot
from reversi.core.plan import Action, Plan
from reversi.core.planner import plan_rollback
from reversi.core.printable import ESCAPED
from reversi.core.report import RollbackReport
from reversi.core.resources import Lineage
from reversi.core.times import parse_since
from reversi.errors import BadInput

__all__ = ["ScopePlan", "ScopeReport", "Selection", "plan_selection"]

_MAX = 200


def _text(name: str, value: object) -> str:
    if not isinstance(value, str) or not 1 <= len(value) <= _MAX:
        raise BadInput(f"{name} must be text of 1-{_MAX} characters")
    if any(c in ESCAPED or not c.isprintable() for c in value):
        raise BadInput(f"{name} must be printable text")
    return value


@dataclass(frozen=True)
class Selection:
    """The runs and steps a rollback of many runs covers (at least one criterion is given)."""

    actor: str | None = None
    key: str | None = None
    tenant: str | None = None
    labels: tuple[tuple[str, str], ...] = ()
    tool: str | None = None
    since: str | None = None
    until: str | None = None

    def __post_init__(self) -> None:
        for name in ("actor", "key", "tenant", "tool", "since", "until"):
            value = getattr(self, name)
            if value is not None:
                _text(name, value)
        for k, v in self.labels:
            _text("a label's name", k)
            _text("a label's value", v)
        if not (self.actor or self.key or self.tenant or self.labels or self.tool or self.since):
            raise BadInput("a rollback of many runs needs a scope: actor, key, tenant, label, tool or since")
        if self.since is not None and self.until is not None and self.until < self.since:
            raise BadInput(f"until ({self.until}) is before since ({self.since})")

    @property
    def step_scope(self) -> RollbackScope | None:
        """The part of each selected run it covers; None: every step."""
        if self.tool is None and self.since is None and self.until is None:
            return None
        return RollbackScope(-1, tool=self.tool, since=self.since, until=self.until)

    def selects(self, run: RunRecord) -> bool:
        """Whether `run` is one of the selection's (its steps still filtered by `step_scope`)."""
        return ((self.actor is None or run.scope.actor == self.actor)
                and (self.key is None or run.principal == self.key)
                and (self.tenant is None or run.scope.tenant == self.tenant)
                and all(run.labels.get(k) == v for k, v in self.labels))

    def to_dict(self) -> JSONObject:
        out: JSONObject = {k: v for k, v in (("actor", self.actor), ("key", self.key), ("tenant", self.tenant),
                                                  ("tool", self.tool), ("since", self.since),
                                                  ("until", self.until)) if v is not None}
        return out | ({"labels": dict(self.labels)} if self.labels else {})

    @classmethod
    def typed(cls, *, actor: str | None = None, key: str | None = None, tenant: str | None = None,
              labels: Mapping[str, LooseJSON] | None = None, tool: str | None = None, since: str | None = None,
              until: str | None = None) -> Selection:
        """The selection as people type it (every surface reads its fields through this): `since` and
        `until` as durations ago (`30m`, `2h`, `7d`) or dates; empty texts count as not given.

        Raises:
            BadInput: a field not of its form, a label whose value is not text, or no criterion at all.
        """
        found = dict(labels or {})
        if not all(isinstance(v, str) for v in found.values()):
            raise BadInput("labels must map names to strings")
        return cls(actor=actor or None, key=key or None, tenant=tenant or None, labels=tuple(sorted(found.items())),
                   tool=tool or None, since=parse_since(since, what="since") if since else None,
                   until=parse_since(until, what="until") if until else None)

    @staticmethod
    def label_pairs(texts: Iterable[str], what: str = "label") -> dict[str, str]:
        """Labels written `K=V`, one per text.

        Raises:
            BadInput: a text without `=` or a name.
        """
        found = {}
        for text in texts:
            name, sep, value = text.partition("=")
            if not sep or not name.strip():
                raise BadInput(f"{what} {text!r}: expected K=V")
            found[name.strip()] = value.strip()
        return found

    @classmethod
    def from_dict(cls, data: Mapping[str, LooseJSON]) -> Selection:
        """The selection `to_dict` made (as a job keeps it)."""
        labels = tuple(sorted(dict(data.get("labels") or {}).items()))
        return cls(data.get("actor"), data.get("key"), data.get("tenant"), labels, data.get("tool"),
                   data.get("since"), data.get("until"))

    def describe(self) -> str:
        parts = [f"{k}={v}" for k, v in self.to_dict().items() if k != "labels"]
        parts += [f"label {k}={v}" for k, v in self.labels]
        return "scope: the runs of " + ", ".join(parts)


@dataclass(frozen=True)
class ScopePlan:
    """The plan of a rollback of many runs: one action per covered step, newest first across runs."""

    selection: Selection
    plans: tuple[Plan, ...]  # one per selected run, newest run first
    actions: tuple[tuple[str, Action], ...]  # (run, action), in the walk's order

    @property
    def fully_reversible(self) -> bool:
        return all(p.fully_reversible for p in self.plans)

    @property
    def run_ids(self) -> list[str]:
        return [p.run_id for p in self.plans]

    def to_dict(self) -> LooseJSONObject:
        return {
            "scope": self.selection.to_dict(),
            "runs": self.run_ids,
            "actions": [{"run": run} | a.to_dict() for run, a in self.actions],
            "fully_reversible": self.fully_reversible,
            "notes": [f"{p.run_id}: {n}" for p in self.plans for n in p.notes],
        }

    def to_text(self) -> str:
        lines = [self.selection.describe(), f"{len(self.plans)} runs, {len(self.actions)} steps"]
        lines += [f"{run}  step {a.step}  {a.tool}  {a.describe()}" for run, a in self.actions]
        lines += [f"note: {p.run_id}: {n}" for p in self.plans for n in p.notes]
        lines.append("fully reversible" if self.fully_reversible else "NOT fully reversible: see above")
        return "\n".join(lines)


def plan_selection(
    selection: Selection,
    snapshots: Sequence[RunSnapshot],
    manifests: ManifestSet,
    lineage: Lineage,
    stands_elsewhere: Callable[[str, int], bool],
    now: datetime | None = None,
) -> ScopePlan:
    """The plan of undoing `selection` over its runs' `snapshots`: each run walked with what will still
    stand in the others when the rollback ends, until that no longer changes (what stands only grows:
    a step deferred in one run can only defer more in the others). `stands_elsewhere(run, step)` says
    whether a step of a run outside the selection stands now."""
    scope = selection.step_scope
    by_run = {s.run.run_id: s for s in snapshots}
    kept = {run: {s.index for s in snap.steps if (s.status.stands or s.status.unresolved)
                  and scope is not None and not scope.covers(s)} for run, snap in by_run.items()}
    standing: dict[str, set[int]] = {run: set(steps) for run, steps in kept.items()}

    def stands(run: str, step: int) -> bool:
        return step in standing[run] if run in standing else stands_elsewhere(run, step)

    plans: dict[str, Plan] = {}
    todo = set(by_run)
    while todo:
        changed = set()
        standing_now = lineage.standing(stands)
        for run in sorted(todo):
            snap = by_run[run]
            plan = plan_rollback(snap, manifests, scope, lineage.for_run(run, len(snap.steps), standing_now), now)
            plans[run] = plan
            stays = kept[run] | {a.step for a in plan.actions if a.leaves_standing}
            if stays != standing[run]:
                standing[run] = stays
                changed.add(run)
        todo = {run for c in changed for run in lineage.runs_sharing([c]) if run != c} & by_run.keys()
    return _assembled(selection, by_run, plans)


def _assembled(selection: Selection, by_run: Mapping[str, RunSnapshot], plans: Mapping[str, Plan]) -> ScopePlan:
    at = {(run, s.index): s.at for run, snap in by_run.items() for s in snap.steps}
    actions = sorted(((run, a) for run, plan in plans.items() for a in plan.actions),
                     key=lambda ra: (at[(ra[0], ra[1].step)], ra[0], ra[1].step), reverse=True)
    newest = {run: max((at[(run, a.step)] for a in plan.actions), default="") for run, plan in plans.items()}
    ordered = sorted(plans.values(), key=lambda p: (newest[p.run_id], p.run_id), reverse=True)
    return ScopePlan(selection, tuple(ordered), tuple(actions))


@dataclass
class ScopeReport:
    """The outcome of a rollback of many runs: the reference page's fields with `{run, step}` entries,
    and each run's own report (`runs`). `already_undone`: covered steps found compensated before it began."""

    selection: Selection
    reports: dict[str, RollbackReport] = field(default_factory=dict)
    compensated: dict[str, list[int]] = field(default_factory=dict)  # by this rollback, every pass
    contained: list[str] = field(default_factory=list)  # what --contain did first, as lines
    in_progress: list[str] = field(default_factory=list)  # runs another rollback held: left to it

    @property
    def complete(self) -> bool:
        return not self.in_progress and all(r.complete for r in self.reports.values())

    def to_dict(self) -> LooseJSONObject:
        out: LooseJSONObject = {"scope": self.selection.to_dict(), "runs": list(self.reports)}
        undone = {(run, step) for run, steps in self.compensated.items() for step in steps}
        out["compensated"] = [{"run": run, "step": s} for run, s in sorted(undone)]
        for name in ("skipped", "unresolved", "unmanifested", "unverified"):
            out[name] = [{"run": run, "step": s} for run, r in self.reports.items() for s in getattr(r, name)
                         if name != "skipped" or (run, s) not in undone]
        out["already_undone"] = [{"run": run, "step": s} for run, r in self.reports.items()
                                 for s in r.already_undone if (run, s) not in undone]
        for name in ("failed", "unrecoverable", "deferred", "awaiting_approval"):
            out[name] = [{"run": run} | x.to_dict() for run, r in self.reports.items() for x in getattr(r, name)]
        out["in_progress"] = list(self.in_progress)
        out["complete"] = self.complete
        out["reports"] = {run: r.to_dict() for run, r in self.reports.items()}
        return out | ({"contained": list(self.contained)} if self.contained else {})

    def to_text(self) -> str:
        lines = [self.selection.describe(), *self.contained]
        for run, report in self.reports.items():
            lines += [f"{run}  {line}" for line in report.lines]
        lines += [f"{run}  rollback already in progress elsewhere: left to it" for run in self.in_progress]
        undone = sum(len(s) for s in self.compensated.values())
        lines.append(f"{undone} steps undone in {len(self.reports)} runs")
        lines.append("rollback complete" if self.complete else "rollback INCOMPLETE")
        return "\n".join(lines)

