"""What a run's page shows: its steps and refused calls as one timeline, the plan, the journal, and for
an operator of the run, its approvals and its last rollback job (sync: call from a worker thread)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from reversi.core import redaction
from reversi.core.dependencies import dependencies_of
from reversi.core.follow_ups import FollowUpState, follow_ups_of
from reversi.core.json_values import LooseJSON
from reversi.core.manifest import ManifestSet
from reversi.core.models import Approval, Event, EventType, RunRecord, StepState, who_acted
from reversi.core.plan import Plan
from reversi.core.resolve_guide import ResolveGuide, guide
from reversi.core.sensitive import Masker
from reversi.core.standing import RunStanding, run_standing
from reversi.engine.access import Access
from reversi.engine.principal_ledger import PrincipalLedger
from reversi.engine.rollback import ReadBack
from reversi.errors import Forbidden, NotFound
from reversi.server.console.rollback_view import JobView, PlanSummary, job_view, summarize
from reversi.server.console.views import clock, pretty, took

# A call's own outcome: how long it took ends there, not when an operator settled it later.
_CALL_OUTCOMES = {EventType.SUCCEEDED, EventType.FAILED, EventType.UNCERTAIN}


@dataclass(frozen=True)
class Dependency:
    step: int
    why: str  # "declared" (depends_on) or the `requires` glob that matched


@dataclass(frozen=True)
class ReadBackView:
    """The last read-back of a step's undo: what the read tool answered, beside what the entry expects."""

    tool: str
    arguments: str
    answer: str
    expected: str
    ok: bool
    mismatch: str = ""


@dataclass
class StepView:
    state: StepState
    args: str
    outcome: str
    started: str = ""
    finished: str = ""
    note: str = ""
    kind: str = ""
    reason: str = ""
    guide: ResolveGuide | None = None
    seq: int = 0  # of its `intended` event: where it sits among the refused calls
    depends: list[Dependency] = field(default_factory=list)
    read_back: ReadBackView | None = None

    @property
    def unresolved(self) -> bool:
        return self.state.status.unresolved

    refused = False
    checkpoint = False


@dataclass(frozen=True)
class RefusedView:
    """A call stopped before it ran: no step number, only a journal entry."""

    seq: int
    at: str
    tool: str
    args: str
    reason: str
    actor: str
    refused = True
    checkpoint = False


@dataclass(frozen=True)
class CheckpointView:
    """A checkpoint the run marked: the steps up to `after_step` came before it."""

    seq: int
    at: str
    name: str
    after_step: int
    actor: str
    refused = False
    checkpoint = True


WINDOW = 50  # steps a run's page shows at once: a run of thousands still loads in a blink


@dataclass(frozen=True)
class StepWindow:
    """The steps a run's page shows: `low`..`high`, of steps 0..`last` (newest first, `WINDOW` at a
    time, counted from the newest, so every page but the oldest is full)."""

    low: int
    high: int
    last: int

    @classmethod
    def around(cls, last: int, step: int | None) -> StepWindow:
        """The window that holds `step` (None: the newest)."""
        if last < 0:
            return cls(0, -1, -1)
        step = last if step is None else min(max(step, 0), last)
        high = last - WINDOW * ((last - step) // WINDOW)
        return cls(max(high - WINDOW + 1, 0), high, last)

    def __contains__(self, step: object) -> bool:
        return isinstance(step, int) and self.low <= step <= self.high

    @property
    def whole(self) -> bool:
        return self.low == 0 and self.high == self.last

    @property
    def newer(self) -> int | None:
        return None if self.high >= self.last else min(self.high + WINDOW, self.last)

    @property
    def older(self) -> int | None:
        return None if self.low <= 0 else self.low - 1


@dataclass
class RunView:
    record: RunRecord
    steps: list[StepView]
    plan: Plan
    events: list[Event]
    approvals: list[Approval]
    job: JobView | None
    summary: PlanSummary
    residue: dict[int, list[str]] = field(default_factory=dict)
    timeline: list[StepView | RefusedView | CheckpointView] = field(default_factory=list)  # newest first
    dependencies: dict[int, list[Dependency]] = field(default_factory=dict)
    checkpoints: list[CheckpointView] = field(default_factory=list)  # oldest first
    to: str | None = None  # the checkpoint `summary` is after (the rollback confirmed from it), if any
    standing: RunStanding | None = None  # where the run stands across every rollback that touched it
    window: StepWindow = StepWindow(0, -1, -1)  # the steps shown: the plan table, picture, timeline, journal
    follow_ups: list[FollowUpState] = field(default_factory=list)  # masked, in the order opened

    @property
    def shown_plan(self) -> Plan:
        """The plan's actions for the steps shown."""
        return replace(self.plan, actions=tuple(a for a in self.plan.actions if a.step in self.window))

    def step_href(self, step: int) -> str:
        """A link to a step's entry: on this page, or on the page of steps that holds it."""
        return f"#step-{step}" if step in self.window else f"?step={step}#step-{step}"


def _timings(events: list[Event]) -> dict[int, dict[str, Any]]:
    found: dict[int, dict[str, Any]] = {}
    for ev in events:
        if ev.step is None:
            continue
        times = found.setdefault(ev.step, {})
        if ev.type == EventType.INTENDED:
            times["started"], times["seq"] = ev.at, ev.seq
        elif ev.type in _CALL_OUTCOMES:
            times["finished"] = ev.at
        elif ev.type == EventType.RESOLVED:
            who = who_acted(ev.actor, ev.data.get("principal"))
            times["note"] = f"settled by {who}: {ev.data.get('note', '')} · {clock(ev.at)}"
        elif ev.type in (EventType.VERIFIED, EventType.VERIFICATION_FAILED) and "tool" in ev.data:
            times["read_back"] = ev
    return found


def _read_back(ev: Event | None, manifests: ManifestSet, tool: str) -> ReadBackView | None:
    if ev is None:
        return None
    entry = manifests.lookup(tool)
    expected = entry.verification.expect if entry is not None and entry.verification is not None else None
    data = ev.data
    answer = pretty(data.get("answer")) if data.get("error") is None else f"an error: {data['error']}"
    return ReadBackView(str(data.get("tool", "")), pretty(data.get("arguments")), answer,
                        pretty(expected) if expected is not None else "(the entry in force declares none)",
                        ev.type == EventType.VERIFIED, str(data.get("mismatch", "")))


def dependencies(steps: tuple[StepState, ...], manifests: ManifestSet) -> dict[int, list[Dependency]]:
    """What each step depends on (SPEC §4): its `depends_on`, and the earlier steps whose tool a glob
    of its tool's `requires` matches."""
    requires = [entry.requires if (entry := manifests.lookup(s.tool)) else () for s in steps]
    found = dependencies_of([s.tool for s in steps], [s.record.depends_on for s in steps], requires)
    return {step: [Dependency(target, why) for target, why in on.items()] for step, on in found.items()}


def run_page(ledger: PrincipalLedger, run_id: str, manifests: ManifestSet, to: str | None = None,
             step: int | None = None) -> RunView:
    """Everything the run page shows, for the window of steps that holds `step` (None: the newest);
    with `to`, the summary is of a rollback after that checkpoint.

    Raises:
        BadInput, NotFound, Forbidden: as `PrincipalLedger.run_record`; NotFound for an unknown `to`.
    """
    run = ledger.get_run(run_id, Access.READ)
    masker = ledger.masker()
    snap = redaction.snapshot(masker, run.snapshot())
    plan = redaction.plan(masker, run.plan())
    events = ledger.events(run.id)
    by_step = {a.step: a for a in plan.actions}
    timings = _timings(events)
    deps = dependencies(snap.steps, manifests)
    window = StepWindow.around(len(snap.steps) - 1, step)
    steps = []
    for state in snap.steps[window.low: window.high + 1]:
        outcome = pretty(state.result) if state.has_result else (state.error or "")
        action = by_step[state.index]
        t = timings.get(state.index, {})
        steps.append(StepView(state, pretty(state.args), outcome, clock(t.get("started")),
                              took(t.get("started"), t.get("finished")), t.get("note", ""), action.kind.value,
                              action.describe(), guide(manifests, state) if state.status.unresolved else None,
                              t.get("seq", 0), deps.get(state.index, []),
                              _read_back(t.get("read_back"), manifests, state.tool)))
    refused = [RefusedView(e.seq, clock(e.at), str(e.data.get("tool", "")), pretty(e.data.get("args")),
                           str(e.data.get("reason", "")), e.actor) for e in events if e.type == EventType.REFUSED]
    marks = [CheckpointView(e.seq, clock(e.at), str(e.data.get("name", "")), int(e.data.get("after_step", -1)),
                            e.actor) for e in events if e.type == EventType.CHECKPOINT]
    low, high = _bounds(window, events)
    timeline: list[StepView | RefusedView | CheckpointView] = sorted(
        [*steps, *(r for r in refused if low <= r.seq <= high), *(m for m in marks if low <= m.seq <= high)],
        key=lambda item: -item.seq)
    approvals: list[Approval] = []
    job: JobView | None = None
    if ledger.principal.reads_tenant:  # an agent reading its own run is no operator of it
        approvals = ledger.approvals(run_id=run.id)
        job = _job(ledger, run.id, snap.steps, events, masker, plan)
    residue = {a.step: list(a.compensation.residue) for a in plan.actions if a.compensation and a.compensation.residue}
    summary = summarize(redaction.plan(masker, run.plan(to=to)) if to is not None else plan, approvals)
    standing = run_standing(snap, events, plan)  # all three masked already
    shown = [e for e in events if e.step in window or (e.step is None and low <= e.seq <= high)]
    # What people still have to do about the steps rollbacks left, from the events read already.
    masker = redaction.learn(masker, snap.steps)
    follow_ups = [redaction.follow_up(masker, f) for f in follow_ups_of(run.id, events)]
    return RunView(snap.run, list(reversed(steps)), plan, shown, approvals, job, summary, residue,
                   timeline, deps, marks, to, standing, window, follow_ups)


def _bounds(window: StepWindow, events: list[Event]) -> tuple[int, int]:
    """The journal's seq range of the window: from its oldest step's first event (the run's start, for
    the oldest window) to just before the first event of the step after it (the end, for the newest)."""
    first: dict[int, int] = {}
    for e in events:
        if e.step is not None and e.step not in first:
            first[e.step] = e.seq
    low = 0 if window.low == 0 else first.get(window.low, 0)
    high = first.get(window.high + 1, 1 << 62) - 1
    return low, high



def _job(ledger: PrincipalLedger, run_id: str, steps: tuple[StepState, ...], events: list[Event],
         masker: Masker, plan: Plan) -> JobView | None:
    to_undo = frozenset(a.step for a in summarize(plan, []).to_undo)  # what the confirmation counts
    try:
        return job_view(ledger.latest_job(run_id), steps, events, masker, to_undo)
    except (NotFound, Forbidden):
        return None


def job_page(ledger: PrincipalLedger, run_id: str) -> JobView | None:
    """The run's last rollback job as the panel shows it (None: it never had one).

    Raises:
        BadInput, NotFound, Forbidden: as `PrincipalLedger.run_record` (operating the run).
    """
    run = ledger.get_run(run_id, Access.OPERATE)
    masker = ledger.masker()
    return _job(ledger, run.id, redaction.snapshot(masker, run.snapshot()).steps, ledger.events(run.id), masker,
                run.plan())


def missing_for_resolve(ledger: PrincipalLedger, run_id: str, step: int, result: LooseJSON) -> list[str]:
    """The fields of `result` that step `step`'s undo needs and does not get (`Run.missing_from_result`).

    Raises:
        BadInput, NotFound, Forbidden: as `PrincipalLedger.run_record` (operating the run); NotFound
            for a step the run does not have.
    """
    return ledger.get_run(run_id, Access.OPERATE).missing_from_result(step, result)


def reconciled(ledger: PrincipalLedger, run_id: str, read_back: ReadBack) -> list[str]:
    """What the probes of the run's unresolved steps said, a line each (masked), newest step first."""
    return [probed.describe() for probed in ledger.reconcile_by_probes(run_id, read_back, masked=True)]
