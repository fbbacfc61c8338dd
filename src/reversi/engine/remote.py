"""Compensations run by a remote worker: claim a step for a lease, then report how it went."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from reversi.core.json_values import JSONObject, to_json
from reversi.core.manifest import ManifestSet, Verification
from reversi.core.models import ApprovalKind, ApprovalStatus, EventType, NewEvent, RunSnapshot, StepStatus
from reversi.core.plan import Action, ActionKind
from reversi.core.resources import RunLineage
from reversi.core.times import format_time
from reversi.core.walk import RollbackWalk
from reversi.engine.lineage import lineage_secret, run_lineage
from reversi.engine.rollback import NOT_VERIFIED, VERIFICATION_FAILED
from reversi.errors import BadInput, NotCompensable, NotFound
from reversi.store.base import Store


@dataclass(frozen=True)
class CompensationWork:
    """A claimed compensation: `call` is the call JSON (with the step's idempotency key); the claim is
    `worker`'s until `claim_until`."""

    run_id: str
    index: int
    call: JSONObject
    claim_until: str
    verification: Verification | None
    worker: str = ""


def begin_compensation(
    store: Store, manifests: ManifestSet, run_id: str, step: int, *, lease_s: float, worker: str
) -> CompensationWork:
    """Claim one standing step for a remote worker, journaling `compensating` with the claim's expiry.

    Raises:
        NotFound: no such run or step.
        NotCompensable: the step needs no undo, is not standing, waits for an approval, still has a
            standing dependent, or is claimed by a running rollback or a live claim.
    """
    if isinstance(lease_s, bool) or not isinstance(lease_s, (int, float)) or not 0 < lease_s < 366 * 86_400:
        raise BadInput(f"lease_s must be a positive number of seconds (under a year), not {lease_s!r}")
    secret = lineage_secret(store)
    lock = store.try_lock_run(run_id)
    if lock is None:
        raise NotCompensable(f"step {step} of {run_id} is claimed by a running rollback")
    with lock, store.write() as q:
        q.lock_run(run_id)
        lock.check(q)
        snapshot = q.snapshot(run_id)
        if snapshot is None:
            raise NotFound(f"no run {run_id}")
        if not 0 <= step < len(snapshot.steps):
            raise NotFound(f"no step {step} in {run_id}")
        action = _walk_to(snapshot, manifests, step, run_lineage(q, snapshot, manifests, secret))
        state = snapshot.step(step)
        if action.kind not in (ActionKind.COMPENSATE, ActionKind.DEFER) or action.compensation is None:
            raise NotCompensable(f"step {step} of {run_id} cannot be claimed: {action.kind.value} ({action.reason})")
        if state.claim is not None and state.claim.is_live():
            raise NotCompensable(f"step {step} of {run_id} is claimed by a remote worker until {state.claim.until}")
        if action.kind is ActionKind.DEFER:
            held = [f"step {', '.join(map(str, action.blocked_by))}"] if action.blocked_by else []
            held += [d.describe() for d in action.blocked_by_runs]
            raise NotCompensable(f"step {step} of {run_id} still has a standing dependent: {'; '.join(held)}")
        call = action.compensation
        if call.then:  # a worker reports one outcome, and such an undo journals each of its calls
            raise NotCompensable(f"step {step} of {run_id} is undone by {call.parts} calls in turn: a rollback "
                                 "makes them, not a remote worker")
        data: JSONObject = {}
        if call.needs_approval:
            approvals = q.approvals_for_call(run_id, ApprovalKind.COMPENSATION, str(step))
            if not approvals or approvals[-1].status is not ApprovalStatus.APPROVED:
                which = approvals[-1].approval_id if approvals else "none requested yet"
                raise NotCompensable(f"step {step} of {run_id} waits for an approval ({which})")
            data["approval_id"] = approvals[-1].approval_id
        until = format_time(datetime.now(UTC) + timedelta(seconds=lease_s))
        data.update(
            tool=call.tool,
            args=call.args,
            idempotency_key=call.idempotency_key,
            attempt=state.attempts + 1,
            worker=worker,
            claim_until=until,
        )
        q.append(run_id, [NewEvent(EventType.COMPENSATING, step, worker, data)])
    return CompensationWork(run_id, step, call.call_json(), until, call.verification, worker)


def _walk_to(snapshot: RunSnapshot, manifests: ManifestSet, step: int, lineage: RunLineage) -> Action:
    """The rollback walk's action for `step` when it alone is undone now: every newer step that
    would be compensated still stands (nobody is undoing it), and holds back what it depends on, as
    do the steps of other runs on the same resources that stand."""
    walk = RollbackWalk(snapshot, manifests, lineage=lineage, now=datetime.now(UTC))
    for action in walk:
        if action.step == step:
            return action
        if action.kind is ActionKind.COMPENSATE:
            walk.still_stands(action.step)
    raise AssertionError(f"step {step} is not in the run")


def complete_compensation(
    store: Store, work: CompensationWork, *, ok: bool, result: object, error: str | None, verified: bool | None,
    actor: str,
) -> StepStatus:
    """Journal how a claimed compensation went; returns the step's new status.

    Only the claim `work` stands for may report: one that expired is still heard while nobody else
    took the step over (the undo it made must not be made again), but not once another worker or a
    rollback has claimed the step since.

    Raises:
        NotCompensable: the step is no longer being compensated (someone else finished it), or it is
            no longer under this claim.
    """
    with store.write() as q:
        q.lock_run(work.run_id)
        snapshot = q.snapshot(work.run_id)
        if snapshot is None or not 0 <= work.index < len(snapshot.steps) \
                or snapshot.step(work.index).status is not StepStatus.COMPENSATING:
            raise NotCompensable(f"step {work.index} of {work.run_id} is not being compensated")
        claim = snapshot.step(work.index).claim
        if claim is None or (claim.worker, claim.until) != (work.worker, work.claim_until):
            holder = f"{claim.worker}'s claim until {claim.until}" if claim else "a rollback"
            raise NotCompensable(f"step {work.index} of {work.run_id} is no longer under this claim: "
                                 f"it is under {holder}")
        events: list[NewEvent] = []
        step = work.index
        if not ok:
            events.append(NewEvent(EventType.COMPENSATION_FAILED, step, actor, {"error": error or "failed"}))
        elif verified is False:
            events += [
                NewEvent(EventType.VERIFICATION_FAILED, step, actor, {"error": error or VERIFICATION_FAILED}),
                NewEvent(EventType.COMPENSATION_FAILED, step, actor, {"error": VERIFICATION_FAILED}),
            ]
        else:
            if verified:
                events.append(NewEvent(EventType.VERIFIED, step, actor, {"by": "remote worker"}))
            elif work.verification is not None:
                events.append(NewEvent(EventType.UNVERIFIED, step, actor, {"reason": NOT_VERIFIED}))
            events.append(NewEvent(EventType.COMPENSATED, step, actor, {"result": to_json(result)}))
        q.append(work.run_id, events)
    return (
        StepStatus.COMPENSATION_FAILED if events[-1].type is EventType.COMPENSATION_FAILED else StepStatus.COMPENSATED
    )
