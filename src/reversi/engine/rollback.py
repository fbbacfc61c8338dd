"""The rollback executor: newest first, one step at a time, journaling before and after each attempt.

For each step the executor takes the planner's verdict, then decides what really happens as it
goes: a step whose dependent failed to be undone, or waits for an approval, is deferred. A step is
journaled `compensating` before every attempt and `compensated` or `compensation_failed` after,
so a crash at any point leaves a ledger from which a re-run continues with the same idempotency
key; a step already `compensated` is never compensated again.
"""

from __future__ import annotations

import asyncio
import inspect
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from reversi.core.backoff import Retry
from reversi.core.expect import first_mismatch
from reversi.core.json_values import to_json
from reversi.core.manifest import ManifestSet
from reversi.core.models import ApprovalStatus, EventType, NewEvent, RunSnapshot, StepState
from reversi.core.plan import LEAVES_STANDING, ActionKind, CompensationCall, Reason
from reversi.core.planner import blockers_for, classify, reference_context
from reversi.core.references import MissingReference, resolve
from reversi.core.report import AwaitingApproval, Deferred, Failure, RollbackReport, Unrecoverable
from reversi.engine.approvals import compensation_approval
from reversi.errors import ConfigError, NotFound
from reversi.store.base import Store

Compensate = Callable[[dict[str, Any]], Any]
Verify = Callable[[dict[str, Any]], Any]
Verifier = Callable[[str, Any], Any]
Progress = Callable[[int, int], None]

NOT_VERIFIED = "no verifier is available to run the declared read-back"
CANNOT_VERIFY = "cannot verify: arguments unavailable"
VERIFICATION_FAILED = "verification failed: did not show the expected state after the undo"


async def _call(fn: Callable[..., Any], *args: Any) -> Any:
    result = fn(*args)
    if inspect.isawaitable(result):
        result = await result
    return result


def _error_text(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__


@dataclass
class RollbackExecutor:
    """Rolls back one run. Hold the run's rollback lock while `execute` runs."""

    store: Store
    manifests: ManifestSet
    compensate: Compensate | None
    retry: Retry = field(default_factory=Retry)
    verify: Verify | None = None
    verifier: Verifier | None = None
    approve_compensations: bool = False
    actor: str = "local"
    progress: Progress | None = None
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
    # The report as it grows while `execute` runs, for progress displays (`progress` is told when it grows).
    report: RollbackReport | None = field(default=None, init=False, repr=False)

    async def execute(self, run_id: str) -> RollbackReport:
        """Undo every standing step of `run_id` that can be undone; report everything else.

        Raises:
            NotFound: no such run.
            ConfigError: a step needs compensating and no compensator was given.
        """
        with self.store.read() as q:
            snapshot = q.snapshot(run_id)
        if snapshot is None:
            raise NotFound(f"no run {run_id}")
        actions = [classify(snapshot, step, self.manifests.lookup(step.tool)) for step in reversed(snapshot.steps)]
        if self.compensate is None and any(a.kind is ActionKind.COMPENSATE for a in actions):
            raise ConfigError("no compensator: pass --compensator-cmd (or compensate= in code) to run the undo")
        blockers = blockers_for(snapshot, self.manifests)
        report = self.report = RollbackReport(run_id)
        for done, action in enumerate(actions, start=1):
            step = snapshot.step(action.step)
            label = f"step {step.index}  {step.tool}"
            stands = action.kind in LEAVES_STANDING
            if action.kind is ActionKind.SKIP:
                report.skipped.append(step.index)
                report.lines.append(f"{label}  skipped  {action.reason}")
            elif action.kind is ActionKind.UNRESOLVED:
                report.unresolved.append(step.index)
                report.lines.append(f"{label}  unresolved  {action.reason}")
            elif action.kind is ActionKind.UNMANIFESTED:
                report.unmanifested.append(step.index)
                report.lines.append(f"{label}  unmanifested  {action.reason}")
            elif action.kind is ActionKind.UNRECOVERABLE:
                report.unrecoverable.append(Unrecoverable(step.index, action.reason or ""))
                report.lines.append(f"{label}  unrecoverable  {action.reason}")
            else:
                assert action.compensation is not None
                blocked_by = blockers.blocked_by(step.index, step.tool)
                if blocked_by:
                    report.deferred.append(Deferred(step.index, blocked_by))
                    report.lines.append(f"{label}  deferred  {Reason.blocked_by(blocked_by)}")
                    stands = True
                else:
                    stands = not await self._undo(snapshot, step, action.compensation, report, label)
            if stands:
                blockers.stands(step.index)
            if self.progress is not None:
                self.progress(done, len(actions))
        return report

    async def _undo(
        self, snapshot: RunSnapshot, step: StepState, call: CompensationCall, report: RollbackReport, label: str
    ) -> bool:
        """Compensate one step; True when it is undone."""
        if step.claim is not None and step.claim.is_live():
            claimed = f"claimed by a remote worker until {step.claim.until}"
            report.failed.append(Failure(step.index, claimed, 0))
            report.lines.append(f"{label}  failed  {claimed}")
            return False
        approval_id: str | None = None
        if call.needs_approval:
            with self.store.write() as q:
                q.lock_run(call.run_id)
                approval = compensation_approval(
                    q,
                    call.run_id,
                    step.index,
                    call.tool,
                    call.args,
                    requested_by=self.actor,
                    approve_pending=self.approve_compensations,
                    actor=self.actor,
                )
            if approval.status is not ApprovalStatus.APPROVED:
                report.awaiting_approval.append(
                    AwaitingApproval(step.index, approval.approval_id, approval.status.value)
                )
                report.lines.append(f"{label}  awaiting approval  {approval.approval_id} ({approval.status.value})")
                return False
            approval_id = approval.approval_id
        result, attempts, error = await self._attempts(call, approval_id)
        if error is not None:
            report.failed.append(Failure(step.index, error, attempts))
            report.lines.append(f"{label}  failed  {error} ({_attempts(attempts)})")
            return False
        return await self._read_back(snapshot, step, call, result, attempts, report, label)

    async def _attempts(self, call: CompensationCall, approval_id: str | None) -> tuple[Any, int, str | None]:
        """Run the compensation (and the verify check) up to `retry.attempts` times with one key."""
        assert self.compensate is not None
        error = ""
        for attempt in range(1, self.retry.attempts + 1):
            if attempt > 1:
                await self.sleep(self.retry.delay_s(attempt, random.uniform(0.5, 1.0)))
            data: dict[str, Any] = {
                "tool": call.tool,
                "args": call.args,
                "idempotency_key": call.idempotency_key,
                "attempt": attempt,
            }
            if approval_id:
                data["approval_id"] = approval_id
            self._journal(call, [NewEvent(EventType.COMPENSATING, call.step, self.actor, data)])
            payload = {**call.call_json(), "attempt": attempt}
            try:
                result = to_json(await _call(self.compensate, payload))
                if self.verify is not None and not await _call(self.verify, payload):
                    raise AssertionError("the verify check did not confirm the undo")
            except Exception as exc:
                error = _error_text(exc)
                self._journal(
                    call,
                    [
                        NewEvent(
                            EventType.COMPENSATION_FAILED, call.step, self.actor, {"error": error, "attempt": attempt}
                        )
                    ],
                )
                continue
            return result, attempt, None
        return None, self.retry.attempts, error

    async def _read_back(
        self,
        snapshot: RunSnapshot,
        step: StepState,
        call: CompensationCall,
        result: Any,
        attempts: int,
        report: RollbackReport,
        label: str,
    ) -> bool:
        """Run the declared read-back, if any, and journal the step's final outcome."""
        done = NewEvent(EventType.COMPENSATED, call.step, self.actor, {"result": result, "attempts": attempts})
        ok_line = f"{label}  compensated -> {call.tool} ({_attempts(attempts)})"
        check = call.verification
        if check is None:
            self._journal(call, [done])
        elif self.verifier is None:
            self._journal(call, [NewEvent(EventType.UNVERIFIED, call.step, self.actor, {"reason": NOT_VERIFIED}), done])
            report.unverified.append(step.index)
            ok_line += ", not verified"
        else:
            failure = await self._verify(snapshot, step, call, done)
            if failure is not None:
                report.failed.append(Failure(step.index, failure, attempts))
                report.lines.append(f"{label}  failed  {failure}")
                return False
            ok_line += ", verified"
        report.compensated.append(step.index)
        report.lines.append(ok_line)
        return True

    async def _verify(
        self, snapshot: RunSnapshot, step: StepState, call: CompensationCall, done: NewEvent
    ) -> str | None:
        """Read back until the answer matches `expect`; None on a match, else the failure journaled."""
        assert call.verification is not None
        assert self.verifier is not None
        check = call.verification
        ctx = reference_context(snapshot, step)
        try:
            arguments = resolve(dict(check.args), ctx)
            expect = resolve(dict(check.expect), ctx)
        except MissingReference as missing:
            self._fail_verification(call, {"error": CANNOT_VERIFY, "missing": missing.ref}, CANNOT_VERIFY)
            return CANNOT_VERIFY
        mismatch, answer = "", None
        for i in range(check.retries + 1):
            if i:
                await self.sleep(check.backoff_ms * 2 ** (i - 1) / 1000)
            try:
                answer = to_json(await _call(self.verifier, check.tool, arguments))
            except Exception as exc:
                mismatch, answer = f"read failed: {_error_text(exc)}", None
                continue
            found = first_mismatch(expect, answer)
            if found is None:
                verified = NewEvent(
                    EventType.VERIFIED,
                    call.step,
                    self.actor,
                    {"tool": check.tool, "arguments": arguments, "answer": answer},
                )
                self._journal(call, [verified, done])
                return None
            mismatch = found
        error = f"{VERIFICATION_FAILED}: {mismatch}"
        self._fail_verification(
            call,
            {
                "tool": check.tool,
                "arguments": arguments,
                "mismatch": mismatch,
                "answer": answer,
                "reads": check.retries + 1,
            },
            error,
        )
        return error

    def _fail_verification(self, call: CompensationCall, data: dict[str, Any], error: str) -> None:
        self._journal(
            call,
            [
                NewEvent(EventType.VERIFICATION_FAILED, call.step, self.actor, data),
                NewEvent(EventType.COMPENSATION_FAILED, call.step, self.actor, {"error": error}),
            ],
        )

    def _journal(self, call: CompensationCall, events: list[NewEvent]) -> None:
        with self.store.write() as q:
            q.lock_run(call.run_id)
            q.append(call.run_id, events)


def _attempts(n: int) -> str:
    return f"{n} attempt" if n == 1 else f"{n} attempts"
