"""The rollback's one decision walk: which step is undone next, and what is deferred and why. Pure: no I/O.

The planner, the rollback executor and remote claims all walk a run the same way, newest first:

    walk = RollbackWalk(snapshot, manifests)
    for action in walk:                      # one Action per step, dependencies already applied
        if action.kind is ActionKind.COMPENSATE and not undo(action):
            walk.still_stands(action.step)   # tell the walk what really happened

An action that leaves its step standing (unresolved, unmanifested, unrecoverable, deferred, or a
compensation whose approval was denied) holds back what the step depends on by itself. A
`compensate` action is assumed to succeed, which is what the planner wants; the executor says
otherwise with `still_stands` when an undo fails or waits, before it asks for the next action, and
remote claims say so for every newer step that nobody is undoing now. A walk given a scope (the
steps after a checkpoint) covers only those steps: the planner and the executor take it the same way.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator
from dataclasses import replace
from datetime import datetime

from reversi.core.checkpoints import RollbackScope
from reversi.core.dependencies import Blockers, dependencies_of
from reversi.core.envelope import Unreadable
from reversi.core.expect import rule_holds, unmet_condition
from reversi.core.json_values import LooseJSON, compact
from reversi.core.manifest import Compensation, Effect, ManifestSet, ToolEntry
from reversi.core.models import RunSnapshot, StepState, StepStatus
from reversi.core.plan import Action, ActionKind, CompensationCall, Reason, Window, compensation_key
from reversi.core.references import NOTHING, ReferenceContext, RunContext, resolve
from reversi.core.resources import RunLineage
from reversi.core.server_undo import DeclaredUndo
from reversi.core.times import format_time
from reversi.core.windows import time_left
from reversi.errors import MissingReference, WindowUnknown


def reference_context(snapshot: RunSnapshot, step: StepState) -> ReferenceContext:
    """What `$args`, `$result`, `$run` and `$step` name for one step."""
    run = snapshot.run
    return ReferenceContext(
        args=step.args,
        result=step.result if step.has_result else None,
        run=RunContext(run.run_id, run.scope.actor, run.scope.tenant, run.scope.environment),
        step=step.index,
        before=step.before if step.has_before else NOTHING,
        before_absent=step.before_absent,
        result_text=step.result_text,
        before_text=step.before_text,
    )


def classify(snapshot: RunSnapshot, step: StepState, entry: ToolEntry | None, now: datetime | None = None) -> Action:
    """The action for one step on its own, before its dependents are taken into account; at `now`, a
    step whose undo window closed is unrecoverable (None: windows are shown, not judged)."""
    index, tool = step.index, step.tool
    if step.status is StepStatus.FAILED:
        return Action(index, tool, ActionKind.SKIP, Reason.NEVER_TOOK_EFFECT)
    if step.status is StepStatus.COMPENSATED:
        return Action(index, tool, ActionKind.SKIP, Reason.ALREADY_COMPENSATED)
    if step.status.unresolved:
        return Action(index, tool, ActionKind.UNRESOLVED, Reason.UNRESOLVED)
    if entry is None:
        return Action(index, tool, ActionKind.UNMANIFESTED, Reason.UNMANIFESTED)
    ctx = reference_context(snapshot, step)
    if entry.effect is Effect.READ or (entry.read_when and unmet_condition(entry.read_when, ctx) is None):
        return Action(index, tool, ActionKind.SKIP, Reason.READ)
    if entry.idempotent:
        return Action(index, tool, ActionKind.SKIP, Reason.IDEMPOTENT)
    if entry.irreversible:
        return Action(index, tool, ActionKind.UNRECOVERABLE, Reason.cannot_be_undone(entry.irreversible_reason))
    if not entry.compensations:
        return Action(index, tool, ActionKind.UNRECOVERABLE, Reason.NO_COMPENSATION)
    unreadable = next((v for v in (step.args, step.result, step.before) if isinstance(v, Unreadable)), None)
    if unreadable is not None:  # encrypted under a key this process lacks, or erased: nothing to undo with
        return Action(index, tool, ActionKind.UNRECOVERABLE, Reason.values_unreadable(unreadable.reason))
    chosen = choose_compensation(entry, ctx)
    if isinstance(chosen, str):
        return Action(index, tool, ActionKind.UNRECOVERABLE, chosen)
    comp, (args, then), why = chosen
    window = _window(entry, ctx, step, now)
    if isinstance(window, Action):
        return window
    call = CompensationCall(
        run_id=snapshot.run.run_id,
        step=index,
        tool=comp.tool,
        original_tool=tool,
        args=args,
        idempotency_key=compensation_key(snapshot.run.run_id, index, comp.tool),
        kind=comp.kind,
        residue=comp.residue,
        needs_approval=_needs_approval(step, entry, comp, ctx),
        verification=comp.verification or entry.verification,
        alternative=entry.alternative_name(comp),
        chosen_because=why,
        then=then,
        declared_by=entry.source if entry.declaration is not None else None,
        window=window,
    )
    return Action(index, tool, ActionKind.COMPENSATE, compensation=call, last_failure=_last_failure(step))


def _window(entry: ToolEntry, ctx: ReferenceContext, step: StepState, now: datetime | None) -> Window | Action | None:
    """The step's undo window (None: it has none), or, when it closed by `now`, the unrecoverable action."""
    if entry.undo_window is None:
        return None
    try:
        closes = entry.undo_window.closes_at(ctx, step.at)
    except MissingReference as missing:
        return Window(None, None, f"{missing.ref} names nothing")
    except WindowUnknown as unknown:
        return Window(None, None, f"{entry.undo_window.written}: {unknown}")
    # An undo begun before its window closed may have taken effect: the rollback reads it back first.
    if now is not None and now >= closes and step.status is not StepStatus.COMPENSATING:
        return Action(step.index, step.tool, ActionKind.UNRECOVERABLE, Reason.window_closed(format_time(closes)))
    return Window(format_time(closes), time_left(closes, now) if now is not None else None)


def entry_of(manifests: ManifestSet, step: StepState) -> ToolEntry | None:
    """The entry in force for a past step: a manifest's, else the undo its server declared when the call
    was made (journaled with it, so every process plans it alike, whatever the server says now)."""
    written = manifests.written(step.tool)
    if written is not None:
        return written
    declared = DeclaredUndo.from_journal(step.declared_undo)
    return declared.entry(step.tool) if declared is not None else None


def choose_compensation(
    entry: ToolEntry, ctx: ReferenceContext
) -> tuple[Compensation, _Built, str | None] | str:
    """The undo for one call: the first alternative whose `when` holds, the arguments of each of its calls
    resolved (`tool`'s, then those of `then`), and why it was chosen (None for a lone compensation); or,
    when there is none, the reason the step is unrecoverable."""
    alternatives = entry.compensations
    if len(alternatives) == 1:  # arguments first: that they cannot be built says more than an unmet `when`
        comp = alternatives[0]
        built = _arguments(comp, ctx)
        if isinstance(built, str):
            return built
        unmet = unmet_condition(comp.when, ctx) if comp.when else None
        return (comp, built, None) if unmet is None else Reason.does_not_apply(unmet)
    passed: list[str] = []
    for comp in alternatives:
        unmet = unmet_condition(comp.when, ctx) if comp.when else None
        if unmet is not None:
            passed.append(f"{entry.alternative_name(comp)}: {unmet}")
            continue
        built = _arguments(comp, ctx)
        if isinstance(built, str):
            return built
        why = f"its conditions hold ({compact(dict(comp.when))})" if comp.when else "it always fits"
        return comp, built, "; ".join([*passed, why]) if passed else why
    return Reason.none_fits(passed)


# The first call's arguments; (tool, arguments) of each after it.
_Built = tuple[LooseJSON, tuple[tuple[str, LooseJSON], ...]]


def _arguments(comp: Compensation, ctx: ReferenceContext) -> _Built | str:
    """The arguments of each of the undo's calls; or why they cannot be built."""
    try:
        return resolve(dict(comp.args), ctx), tuple((call.tool, resolve(dict(call.args), ctx)) for call in comp.then)
    except MissingReference as missing:
        return Reason.arguments_unavailable(missing.ref, _why_missing(ctx, missing.ref))


def _last_failure(step: StepState) -> str | None:
    """A step whose undo failed last time: the error and after how many attempts."""
    if step.status is not StepStatus.COMPENSATION_FAILED:
        return None
    tries = f"{step.attempts} attempt{'' if step.attempts == 1 else 's'}"
    return f"{step.last_error or 'no error said'}, after {tries}"


def _why_missing(ctx: ReferenceContext, ref: str) -> str:
    """What a missing `$before` reference means: the capture found nothing, or none was made."""
    if not ref.startswith("$before"):
        return ""
    if ctx.before_absent is not None:
        said = ctx.before_absent if len(ctx.before_absent) <= 200 else f"{ctx.before_absent[:197]}..."
        return f"the capture found nothing before the call: {said}"
    return "" if ctx.before is not NOTHING else "nothing was captured before the call"


def _needs_approval(step: StepState, entry: ToolEntry, comp: Compensation, ctx: ReferenceContext) -> bool:
    """Whether the step's undo waits for an approval. A step that ran under an entry keeps the rule it
    ran under, so a later edit of the manifest changes nothing for it: when the entry is unchanged, the
    chosen alternative's rule; when it was edited since, what was snapshotted then (whether any
    alternative needed one). A step that ran with no entry takes the manifest in force."""
    if step.record.manifest_digest not in (None, entry.digest):
        return step.record.compensation_needs_approval
    return rule_holds(comp.requires_approval, ctx)


class RollbackWalk:
    """The run's steps as rollback actions, newest first, each decided once the newer ones are known.

    Iterate it once. Call `still_stands(step)` for a `compensate` action whose undo did not happen,
    before taking the next action. Or take it as a frontier, to undo independent steps at once:
    `ready()` gives the steps all of whose dependents are done, and `done(step, stands)` says how each
    `compensate` action ended.
    """

    def __init__(
        self,
        snapshot: RunSnapshot,
        manifests: ManifestSet,
        scope: RollbackScope | None = None,
        lineage: RunLineage | None = None,
        now: datetime | None = None,
        deadline_first: bool = False,
    ) -> None:
        """`scope`: walk only the steps it covers (those after a checkpoint); the earlier ones are kept
        as they are, and no action is made for them. `lineage`: what depends on the run's steps through
        the resources they touched, in this run and (those that will still stand) in others. `now`: the
        moment undo windows are judged at (None: shown, not judged). `deadline_first`: of the steps whose
        dependents have all been walked, take the one whose undo window closes soonest first (those with
        no window newest first, after them); by default, newest first."""
        self.snapshot = snapshot
        self.now = now
        self.deadline_first = deadline_first
        self.scope = scope
        self._first = scope.after_step + 1 if scope is not None else 0
        self._entries = [entry_of(manifests, step) for step in snapshot.steps]
        self._lineage = lineage or RunLineage()
        by_resource = self._lineage.same_run
        self._depends_on = [step.record.depends_on + (by_resource[step.index] if step.index < len(by_resource) else ())
                            for step in snapshot.steps]
        self._blockers = Blockers(self._depends_on, [entry.requires if entry is not None else ()
                                                     for entry in self._entries])
        self._frontier: _Frontier | None = None

    def entry(self, step: int) -> ToolEntry | None:
        """The manifest entry in force for a step's tool."""
        return self._entries[step]

    def needs_compensator(self) -> bool:
        """Whether some step has an undo to run (now, or once what holds it back is gone)."""
        return any(
            classify(self.snapshot, step, self._entries[step.index], self.now).kind is ActionKind.COMPENSATE
            for step in self.steps
        )

    @property
    def steps(self) -> tuple[StepState, ...]:
        """The steps the walk covers, oldest first."""
        after = self.snapshot.steps[self._first:]
        scope = self.scope
        return tuple(s for s in after if scope.covers(s)) if scope is not None and scope.filtered else after

    def __iter__(self) -> Iterator[Action]:
        if self.deadline_first:
            yield from self._one_at_a_time()
            return
        for step in self._walked():
            action = self._decide(step)
            if action.leaves_standing:
                self._blockers.stands(step.index)
            yield action

    def _walked(self) -> list[StepState]:
        """The steps the walk decides, newest first. A step outside the scope that stands is marked so,
        since it holds back what it depends on."""
        scope = self.scope
        walked: list[StepState] = []
        for step in reversed(self.snapshot.steps[self._first:]):
            if scope is not None and scope.filtered and not scope.covers(step):
                if step.status.stands or step.status.unresolved:
                    self._blockers.stands(step.index)
                continue
            walked.append(step)
        return walked

    def ready(self, limit: int | None = None) -> list[Action]:
        """The actions of the steps that are ready now: every step of the walk that depends on them is
        done. Each step comes once. A `compensate` action is in flight until `done(step, stands)` is
        called for it; any other action is done as it is returned, which may make more steps ready (they
        come in the same list). At most `limit` `compensate` actions are returned (None: all that are
        ready); the rest wait for the next call. Ready steps come newest first, or by their undo windows
        with `deadline_first`. Don't mix with iterating the walk."""
        frontier = self._frontier if self._frontier is not None else self._start_frontier()
        actions: list[Action] = []
        taken = 0
        while frontier.heap and (limit is None or taken < limit):
            action = self._decide(self.snapshot.step(frontier.pop()))
            actions.append(action)
            if action.kind is ActionKind.COMPENSATE:
                taken += 1
            else:
                self.done(action.step, action.leaves_standing)
        return actions

    def done(self, step: int, stands: bool) -> None:
        """Record that `step`'s action is over, and whether the step still stands (its undo failed, waits
        or was not run): the steps it depends on may now be ready."""
        assert self._frontier is not None, "done() follows ready()"
        if stands:
            self._blockers.stands(step)
        self._frontier.release(step)

    @property
    def finished(self) -> bool:
        """Whether every step was given by `ready` and is done."""
        return self._frontier is not None and self._frontier.left == 0

    def _one_at_a_time(self) -> Iterator[Action]:
        """The walk in frontier order, one step at a time, each done once the caller has handled it."""
        while batch := self.ready(limit=1):
            for action in batch:
                yield action
                if action.kind is ActionKind.COMPENSATE:
                    self.done(action.step, action.leaves_standing)
        assert self.finished, "a step of the walk never became ready"  # never a report that skipped steps

    def _start_frontier(self) -> _Frontier:
        walked = self._walked()
        deps = dependencies_of([s.tool for s in self.snapshot.steps], self._depends_on,
                               [e.requires if e is not None else () for e in self._entries])
        key = self._by_window if self.deadline_first else _newest_first
        self._frontier = _Frontier(walked, deps, key)
        return self._frontier

    def _by_window(self, step: StepState) -> tuple[str, int]:
        return self._closes(step), -step.index

    def _closes(self, step: StepState) -> str:
        """When the step's undo window closes (RFC 3339, which sorts as time); "~" (after any) for none."""
        comp = classify(self.snapshot, step, self._entries[step.index], self.now).compensation
        window = comp.window if comp is not None else None
        return window.closes if window is not None and window.closes is not None else "~"

    def still_stands(self, step: int) -> None:
        """Record that `step`, walked already, still stands: its undo failed, waits or is not run now."""
        self._blockers.stands(step)

    def _decide(self, step: StepState) -> Action:
        action = classify(self.snapshot, step, self._entries[step.index], self.now)
        if action.kind is not ActionKind.COMPENSATE:
            return action
        blocked_by = self._blockers.blocked_by(step.index, step.tool)
        other_runs = self._lineage.standing.get(step.index, ())
        if blocked_by or other_runs:
            return Action(
                action.step, action.tool, ActionKind.DEFER, Reason.blocked_by(blocked_by, other_runs),
                action.compensation, blocked_by, other_runs,
            )
        comp = action.compensation
        if step.denied_approval is not None and comp is not None and comp.needs_approval:
            return replace(action, denied_approval=step.denied_approval)
        return action


def _newest_first(step: StepState) -> tuple[str, int]:
    return "", -step.index


class _Frontier:
    """The walked steps that may be decided now: those whose walked dependents are all done."""

    def __init__(self, steps: list[StepState], deps: dict[int, dict[int, str]],
                 key: Callable[[StepState], tuple[str, int]]) -> None:
        """`steps`: the walked steps; `deps`: what each step depends on; `key`: the order of ready steps.

        Only a newer step holds back an older one, as in the walk one step at a time: a resource can
        make an older step depend on a newer one (its outcome was journaled after the newer one's), and
        with an explicit dependency the other way that would be a cycle no step of which is ever ready."""
        self._covered = {step.index: step for step in steps}
        self._deps = {dependent: [t for t in targets if t < dependent and t in self._covered]
                      for dependent, targets in deps.items() if dependent in self._covered}
        self._key = key
        self._waiting_on = dict.fromkeys(self._covered, 0)  # walked dependents not done yet
        for targets in self._deps.values():
            for target in targets:
                self._waiting_on[target] += 1
        self.heap = [(key(step), step.index) for step in steps if self._waiting_on[step.index] == 0]
        heapq.heapify(self.heap)
        self.left = len(steps)

    def pop(self) -> int:
        return heapq.heappop(self.heap)[1]

    def release(self, step: int) -> None:
        """`step` is done: each step it depends on waits for one dependent fewer."""
        self.left -= 1
        for target in self._deps.get(step, ()):
            self._waiting_on[target] -= 1
            if self._waiting_on[target] == 0:
                heapq.heappush(self.heap, (self._key(self._covered[target]), target))
