"""What the rollback panel says: what a rollback would undo and leave, and how the last one is going."""

from __future__ import annotations

from dataclasses import dataclass, field

from reversi.core import redaction
from reversi.core.models import Approval, ApprovalKind, ApprovalStatus, Event, EventType, StepState
from reversi.core.plan import Action, ActionKind, Plan
from reversi.core.report import ReportJSON
from reversi.core.sensitive import Masker
from reversi.engine.jobs import Job, JobJSON, JobState


@dataclass(frozen=True)
class PlanSummary:
    """The plan counted for people: what a rollback undoes, what stays and why, what needs approval."""

    to_undo: list[Action]
    unknown: list[Action]
    cannot: list[Action]  # unrecoverable or unmanifested
    blocked: list[Action]
    denied: list[Action]  # a compensation whose approval was denied: it stays
    need_approval: list[Action]  # to undo once someone approves (the box approves those not denied)
    pending: dict[int, str] = field(default_factory=dict)  # step -> its pending compensation approval

    @property
    def stays(self) -> list[Action]:
        return sorted(self.unknown + self.cannot + self.blocked + self.denied, key=lambda a: -a.step)

    @property
    def done_already(self) -> bool:
        """Nothing to undo and nothing left standing: every step was undone or needed no undo."""
        return not self.to_undo and not self.stays


def summarize(plan: Plan, approvals: list[Approval]) -> PlanSummary:
    """Sort the plan's actions by what the rollback does about them (`approvals`: the run's)."""
    approved = {a.step for a in approvals
                if a.kind is ApprovalKind.COMPENSATION and a.status is ApprovalStatus.APPROVED and not a.used}
    pending = {a.step: a.approval_id for a in approvals
               if a.kind is ApprovalKind.COMPENSATION and a.status is ApprovalStatus.PENDING and a.step is not None}
    by_kind: dict[ActionKind, list[Action]] = {kind: [] for kind in ActionKind}
    denied: list[Action] = []
    for action in plan.actions:
        if action.kind is ActionKind.COMPENSATE and action.denied_approval is not None:
            denied.append(action)
        else:
            by_kind[action.kind].append(action)
    to_undo = by_kind[ActionKind.COMPENSATE]
    need = [a for a in to_undo if a.compensation is not None and a.compensation.needs_approval
            and a.step not in approved]
    return PlanSummary(to_undo, by_kind[ActionKind.UNRESOLVED],
                       by_kind[ActionKind.UNRECOVERABLE] + by_kind[ActionKind.UNMANIFESTED],
                       by_kind[ActionKind.DEFER], denied, need, pending)


@dataclass(frozen=True)
class JobView:
    """A rollback job as the panel shows it: how far it is, the step it is on, the report so far."""

    job: JobJSON
    state: str
    total: int
    done: int
    attempts: int  # the job's attempts per compensation
    current: StepState | None = None
    attempt: int = 0  # the current step's attempt, in this job
    last_error: str | None = None  # the current step's last failed attempt, in this job
    retry_at: str | None = None  # when its next attempt goes, if one will
    report: ReportJSON | None = None

    @property
    def finished(self) -> bool:
        return self.state == JobState.DONE


def job_view(job: Job, steps: tuple[StepState, ...], events: list[Event], masker: Masker,
             to_undo: frozenset[int] = frozenset()) -> JobView:
    """The job with the state of the step it is on, from the run's steps and journal (both shown
    masked already), its report masked by `masker`. `to_undo`: the steps the run's plan would undo now.

    It counts what the confirmation counted, the steps to undo: those this job has tried (undone or
    failed), and those the plan still undoes that it has not reached yet."""
    data = redaction.report(masker, job.to_dict())
    after = int((data.get("scope") or {}).get("after_step", -1))  # a job after a checkpoint keeps steps 0..after
    current_step = data["current_step"]
    report = data["report"]
    tried = {*report["compensated"], *(f["step"] for f in report["failed"])} if report is not None else set()
    if job.state is JobState.DONE:
        ahead: set[int] = set()
    else:
        reached = current_step if job.state is JobState.RUNNING and current_step is not None else len(steps)
        ahead = {step for step in to_undo if after < step <= reached} - tried  # newest first, one by one
    total, done = len(tried) + len(ahead), len(tried)
    current = steps[current_step] if job.state is JobState.RUNNING and current_step is not None \
        and 0 <= current_step < len(steps) else None
    attempt, last_error, retry_at = 0, None, None
    if current is not None:
        since = data["started_at"] or data["created_at"]
        for ev in events:
            if ev.step != current.index or ev.at < since:
                continue
            if ev.type == EventType.COMPENSATING:
                attempt, retry_at = max(attempt, int(ev.data.get("attempt", 1))), None
            elif ev.type == EventType.COMPENSATION_FAILED:
                last_error = str(ev.data.get("error", ""))
                retry_at = ev.data.get("retry_at")
    return JobView(data, job.state.value, total, done, job.row.attempts, current, attempt, last_error,
                   retry_at if isinstance(retry_at, str) and attempt < job.row.attempts else None, data["report"])
