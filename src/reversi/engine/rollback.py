"""The rollback executor: newest first, journaling before and after each attempt.

By default it undoes one step at a time. With `concurrency` N above one, it undoes up to N steps at
once, taking the walk as a frontier: a step is started only once every step that depends on it is
done, so no undo ever runs while a dependent stands; each step keeps its own journal entries and key.

The executor walks the run with the same `RollbackWalk` the planner uses, and tells it what really
happened: a step whose undo failed, or waits for an approval, still stands, so what it depends on
is deferred. A step is journaled `compensating` before every attempt and `compensated` or
`compensation_failed` after, so a crash at any point leaves a ledger from which a re-run continues
with the same idempotency key; a step already `compensated` is never compensated again, nor one a
remote worker reports done while the rollback runs (checked as each attempt begins). Every read
and write of the store is awaited off the caller's event loop.
"""

from __future__ import annotations

import asyncio
import inspect
import random
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, TypeVar, assert_never

from reversi.core.backoff import Retry
from reversi.core.checkpoints import RollbackScope
from reversi.core.expect import first_mismatch
from reversi.core.follow_ups import FollowUpState, follow_ups_of, opened_data
from reversi.core.json_values import JSON, JSONObject, LooseJSON, LooseJSONObject, to_json
from reversi.core.manifest import ManifestSet
from reversi.core.models import (
    Approval,
    ApprovalStatus,
    Event,
    EventType,
    NewEvent,
    RunSnapshot,
    StepState,
    StepStatus,
    derive_status,
    in_seconds,
    parts_done,
)
from reversi.core.plan import Action, ActionKind, CompensationCall, Reason
from reversi.core.references import resolve
from reversi.core.report import AwaitingApproval, Deferred, Failure, RollbackReport, Unrecoverable
from reversi.core.resources import RunLineage
from reversi.core.times import parse_time
from reversi.core.walk import RollbackWalk, reference_context
from reversi.engine import tracing
from reversi.engine.approvals import compensation_approval
from reversi.engine.lineage import lineage_secret, run_lineage
from reversi.errors import BadInput, ConfigError, MissingReference, NotFound, ToolAnsweredError
from reversi.store.base import Store
from reversi.store.leases import Lease
from reversi.store.queries import Queries

# What a rollback is given (the SDK's `compensate=`, `verify=` and `verifier=`): the undo of one call,
# the check that the undo is visible (truthy when it is), and what runs a declared read-back (or any read
# of a tool: captures and probes too): `(tool, arguments) -> answer`.
# What they are handed is read as the manifest shapes it; what they answer is journaled as JSON (`to_json`).
Compensate = Callable[[LooseJSONObject], object]
CheckUndo = Callable[[LooseJSONObject], object]
ReadBack = Callable[[str, LooseJSON], object]
# Told (done, total) after each step of the rollback's scope (`step_after` says which step comes next). It
# may be async.
Progress = Callable[[int, int], Any]
T = TypeVar("T")


def step_after(done: int, total: int, after_step: int = -1) -> int | None:
    """The step a rollback of `total` steps works on once `done` are through (None: none is left). It
    goes newest first, one step at a time, down to the first step after `after_step` (its scope's)."""
    return after_step + total - done if done < total else None

NOT_VERIFIED = "no verifier is available to run the declared read-back"
CANNOT_VERIFY = "cannot verify: arguments unavailable"
VERIFICATION_FAILED = "verification failed: did not show the expected state after the undo"
NO_COMPENSATOR = "no compensator: a step needs undoing and nothing was given to run its compensation"


async def _call(fn: Callable[..., Any], *args: Any) -> Any:
    result = fn(*args)
    if inspect.isawaitable(result):
        result = await result
    return result


async def _outliving_cancellation(work: Awaitable[None]) -> None:
    """Await `work` to its end even when the caller is cancelled meanwhile; then raise the cancellation."""
    task = asyncio.ensure_future(work)
    cancelled = False
    while not task.done():
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError:
            cancelled = True
    if cancelled:
        raise asyncio.CancelledError()


def _off_the_loop(options: RollbackOptions, pool: ThreadPoolExecutor) -> RollbackOptions:
    """`options` with its sync compensation, check and read-back run in `pool` rather than on the loop."""

    def off(fn: Callable[..., Any] | None) -> Any:
        if fn is None or inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(type(fn).__call__):
            return fn

        async def in_pool(*args: Any) -> Any:
            result = await asyncio.get_running_loop().run_in_executor(pool, fn, *args)
            return await result if inspect.isawaitable(result) else result  # a sync callable may hand back a coroutine

        return in_pool

    return replace(options, compensate=off(options.compensate), check_undo=off(options.check_undo),
                   read_back=off(options.read_back))


def _error_text(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__


@dataclass(frozen=True, kw_only=True)
class RollbackOptions:
    """How one rollback runs: who undoes, checks and reads back, how often it retries, who acts."""

    compensate: Compensate | None = None
    retry: Retry = field(default_factory=Retry)
    check_undo: CheckUndo | None = None
    read_back: ReadBack | None = None
    approve_compensations: bool = False
    actor: str = "local"
    principal: str | None = None  # who runs it, as authenticated: journaled in each event's data beside `actor`
    progress: Progress | None = None
    job: str | None = None  # the rollback job it runs for, journaled in each event's data (where a run stands)
    clock: Callable[[], datetime] = field(default=lambda: datetime.now(UTC))  # what undo windows are judged by
    deadline_first: bool = False  # take ready steps by their undo windows, soonest first (`RollbackWalk`)
    follow_up: Callable[[LooseJSONObject], object] | None = None  # told of each follow-up opened (an issue tracker)
    concurrency: int = 1  # how many independent steps are undone at once (1: one at a time, newest first)

    def __post_init__(self) -> None:
        check_concurrency(self.concurrency)


MAX_CONCURRENCY = 64


def check_concurrency(n: int) -> int:
    """`n` if it is a number of steps a rollback may undo at once.

    Raises:
        BadInput: it is not an integer from 1 to MAX_CONCURRENCY.
    """
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_CONCURRENCY:
        raise BadInput(f"concurrency must be a whole number from 1 to {MAX_CONCURRENCY}, not {n!r}")
    return n


@dataclass
class RollbackExecutor:
    """Rolls back one run. Hold the run's rollback lease (`lease`) while `execute` runs: every journal
    write checks it in its own transaction, and it is checked before each compensation is called."""

    store: Store
    manifests: ManifestSet
    options: RollbackOptions = field(default_factory=RollbackOptions)
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
    lease: Lease | None = None
    # The report as it grows while `execute` runs, for progress displays (`progress` is told when it grows).
    report: RollbackReport | None = field(default=None, init=False, repr=False)
    # The steps being undone right now, while a rollback undoes several at once (`concurrency` above one).
    in_flight: set[int] = field(default_factory=set, init=False, repr=False)

    async def execute(self, run_id: str, scope: RollbackScope | None = None) -> RollbackReport:
        """Undo every standing step of `run_id` that can be undone (of those `scope` covers, when given:
        the steps after a checkpoint); report everything else.

        Raises:
            NotFound: no such run.
            ConfigError: a step needs compensating and no compensator was given.
            StoreUnavailable: the store could not be read or written.
            Fenced: the lease was taken over by another process; nothing more was journaled.
        """
        with tracing.rollback_span(run_id) as span:
            report = await self._execute(run_id, scope)
            tracing.rolled_back(span, report.complete)
            return report

    async def _execute(self, run_id: str, scope: RollbackScope | None) -> RollbackReport:
        read = await asyncio.to_thread(self._snapshot, run_id)
        if read is None:
            raise NotFound(f"no run {run_id}")
        snapshot, lineage = read
        walk = RollbackWalk(snapshot, self.manifests, scope, lineage, self.options.clock(),
                            self.options.deadline_first)
        if self.options.compensate is None and walk.needs_compensator():
            raise ConfigError(NO_COMPENSATOR)
        report = self.report = RollbackReport(run_id, scope=scope)
        if self.options.concurrency > 1:
            await self._walk_at_once(snapshot, walk, report)
        else:
            await self._walk_in_turn(snapshot, walk, report)
        await self._follow_ups(snapshot, walk, report)
        return report

    async def _walk_in_turn(self, snapshot: RunSnapshot, walk: RollbackWalk, report: RollbackReport) -> None:
        """Undo the steps one at a time, in the walk's order."""
        total = len(walk.steps)
        for done, action in enumerate(walk, start=1):
            if action.kind is ActionKind.COMPENSATE:
                if not await self._compensate(snapshot, action, report):
                    walk.still_stands(action.step)
            else:
                _report_unchanged(action, report)
            await self._progress(done, total)

    async def _walk_at_once(self, snapshot: RunSnapshot, walk: RollbackWalk, report: RollbackReport) -> None:
        """Undo up to `concurrency` steps at once, each as soon as every step that depends on it is done.
        Sync callables run in a pool of as many threads, so a blocking compensator overlaps too."""
        limit, total, done = self.options.concurrency, len(walk.steps), 0
        pool = ThreadPoolExecutor(limit, thread_name_prefix="reversi-rollback")
        executor = replace(self, options=_off_the_loop(self.options, pool))
        running: dict[asyncio.Task[bool], int] = {}
        order: dict[int, int] = {}  # each step's place in the order the walk gave them
        try:
            while True:
                for action in walk.ready(limit - len(running)):
                    order.setdefault(action.step, len(order))
                    if action.kind is ActionKind.COMPENSATE:
                        self.in_flight.add(action.step)
                        running[asyncio.create_task(executor._compensate(snapshot, action, report))] = action.step
                    else:
                        _report_unchanged(action, report)
                        done += 1
                        await self._progress(done, total)
                if not running:
                    assert walk.finished, "a step of the walk never became ready"  # never a report that skips it
                    break
                finished, _ = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
                for task in finished:
                    step = running.pop(task)
                    undone = task.result()  # a Fenced or StoreUnavailable stops the whole rollback
                    self.in_flight.discard(step)
                    walk.done(step, stands=not undone)
                    done += 1
                    await self._progress(done, total)
        finally:
            for task in running:
                task.cancel()
            await asyncio.gather(*running, return_exceptions=True)
            self.in_flight.clear()
            # A sync undo under way in the pool cannot be stopped: the run's lease is kept until it ends,
            # or the next rollback of the run could send the same undo while this one still runs.
            await _outliving_cancellation(asyncio.to_thread(pool.shutdown, wait=True, cancel_futures=True))
        report.in_walk_order(order if self.options.deadline_first else None)

    async def _compensate(self, snapshot: RunSnapshot, action: Action, report: RollbackReport) -> bool:
        assert action.compensation is not None
        step = snapshot.step(action.step)
        return await self._undo(snapshot, step, action.compensation, report, f"step {step.index}  {step.tool}")

    async def _progress(self, done: int, total: int) -> None:
        if self.options.progress is not None:
            await _call(self.options.progress, done, total)

    async def _follow_ups(self, snapshot: RunSnapshot, walk: RollbackWalk, report: RollbackReport) -> None:
        """Open a follow-up for each step the rollback leaves in the world whose entry declares one (once
        per step, whatever the re-runs), hand each new one to the `follow_up` hook, and list them all."""
        await self._close_follow_ups_of_undone(snapshot, report)
        stays = report.staying
        run_id = snapshot.run.run_id
        wanted: dict[int, JSONObject] = {}
        for index, why in sorted(stays.items()):
            entry = walk.entry(index)
            if entry is not None and entry.follow_up is not None:
                ctx = reference_context(snapshot, snapshot.step(index))
                wanted[index] = opened_data(entry.follow_up, ctx, run_id, index, why)
        if not wanted:
            return

        def open_new(q: Queries) -> tuple[list[int], list[Event]]:
            """In one write: a `follow_up_opened` for each step that has none yet; then the steps' events."""
            have = {ev.step for index in wanted for ev in q.step_events(run_id, index)
                    if ev.type == EventType.FOLLOW_UP_OPENED}
            new = [index for index in wanted if index not in have]
            q.append(run_id, [self._event(EventType.FOLLOW_UP_OPENED, index, wanted[index]) for index in new])
            return new, sorted((ev for index in wanted for ev in q.step_events(run_id, index)), key=lambda e: e.seq)

        opened, events = await self._write(run_id, open_new)
        found = follow_ups_of(run_id, events)
        report.follow_ups = [f.to_dict() for f in found]
        report.lines += [f"step {i}  follow-up opened  {wanted[i]['follow_up_id']}  {wanted[i]['title']}"
                         for i in opened]
        if self.options.follow_up is not None:
            await self._hand(run_id, [f for f in found if f.status == "open" and not f.handed], report)

    async def _hand(self, run_id: str, waiting: list[FollowUpState], report: RollbackReport) -> None:
        """Hand each open follow-up the hook has not taken yet (new, or one an earlier rollback could not
        hand) to it, and journal those it took. A hook that fails leaves its follow-up for the next
        rollback; one that dies after the hook took it, before the journal says so, hands it again."""
        assert self.options.follow_up is not None
        taken: list[FollowUpState] = []
        for follow_up in waiting:
            try:
                await _call(self.options.follow_up, follow_up.hook_payload())
            except Exception as exc:  # the follow-up stands in the journal all the same
                report.lines.append(f"step {follow_up.step}  follow-up {follow_up.follow_up_id}: its hook failed"
                                    f" (the next rollback hands it again): {_error_text(exc)}")
                continue
            taken.append(follow_up)
        if taken:
            await self._write(run_id, lambda q: q.append(run_id, [
                self._event(EventType.FOLLOW_UP_HANDED, f.step, {"follow_up_id": f.follow_up_id}) for f in taken]))

    async def _close_follow_ups_of_undone(self, snapshot: RunSnapshot, report: RollbackReport) -> None:
        """A step with an open follow-up (an earlier rollback could not undo it) that this one undid needs
        no one any more: its follow-up is closed, saying so."""
        undone = [i for i in [*report.compensated, *report.already_undone] if snapshot.step(i).follow_up_open]
        if not undone:
            return

        def close(q: Queries) -> None:
            for index in undone:
                for found in follow_ups_of(snapshot.run.run_id, q.step_events(snapshot.run.run_id, index)):
                    if found.status == "open":
                        q.append(snapshot.run.run_id, [self._event(EventType.FOLLOW_UP_CLOSED, index, {
                            "follow_up_id": found.follow_up_id, "note": "undone by a later rollback"})])

        await self._write(snapshot.run.run_id, close)
        report.lines += [f"step {i}  follow-up closed  undone by this rollback" for i in undone]

    def _snapshot(self, run_id: str) -> tuple[RunSnapshot, RunLineage] | None:
        secret = lineage_secret(self.store)
        with self.store.read() as q:
            snapshot = q.snapshot(run_id)
            return None if snapshot is None else (snapshot, run_lineage(q, snapshot, self.manifests, secret))

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
            approval = await self._write(call.run_id, lambda q: self._approval(q, call))
            if approval.status is not ApprovalStatus.APPROVED:
                report.awaiting_approval.append(
                    AwaitingApproval(step.index, approval.approval_id, approval.status.value)
                )
                report.lines.append(f"{label}  awaiting approval  {approval.approval_id} ({approval.status.value})")
                return False
            approval_id = approval.approval_id
        if step.status is StepStatus.COMPENSATING and await self._found_undone(snapshot, step, call):
            report.compensated.append(step.index)
            report.lines.append(f"{label}  compensated -> {call.tools} (an interrupted undo: its read-back found it "
                                "done, so it was not sent again), verified")
            return True
        window = call.window.closes if call.window is not None else None
        if window is not None and self.options.clock() >= parse_time(window):  # it closed while the rollback ran
            reason = Reason.window_closed(window)
            report.unrecoverable.append(Unrecoverable(step.index, reason))
            report.lines.append(f"{label}  unrecoverable  {reason}")
            return False
        tried = await self._attempts(call, approval_id)
        if tried is None:
            report.skipped.append(step.index)
            report.lines.append(f"{label}  skipped  {Reason.ALREADY_COMPENSATED}")
            return True
        result, attempts, error = tried
        if error is not None:
            report.failed.append(Failure(step.index, error, attempts))
            report.lines.append(f"{label}  failed  {error} ({_attempts(attempts)})")
            return False
        return await self._read_back(snapshot, step, call, result, attempts, report, label)

    async def _attempts(
        self, call: CompensationCall, approval_id: str | None
    ) -> tuple[JSON, int, str | None] | None:
        """Run the compensation (and the verify check) up to `retry.attempts` times with one key; None
        when the step turned out compensated already (see `_begin_attempt`) and nothing was run. An undo
        of several calls goes on from the first call not known done, on each attempt and each re-run."""
        compensate, retry = self.options.compensate, self.options.retry
        assert compensate is not None
        error: str | None = ""
        wait_s = 0.0
        for attempt in range(1, retry.attempts + 1):
            if attempt > 1:
                await self.sleep(wait_s)
            with tracing.compensation_span(call.run_id, call.step, call.tool, attempt) as span:
                trace = tracing.journal_fields()  # the rollback's trace, beside the step's own in `intended`
                part = await self._begin_attempt(call, attempt, approval_id, trace)
                if part is None:
                    return None
                result, part, error = await self._run_parts(call, part, attempt, approval_id, trace)
                if error is not None:
                    tracing.compensation_ended(span, error)
                    said: JSONObject = {"error": error, "attempt": attempt}
                    if call.then:
                        said["part"] = part
                    if attempt < retry.attempts:  # when the next attempt goes, for whoever watches
                        wait_s = retry.delay_s(attempt + 1, random.uniform(0.5, 1.0))
                        said["retry_at"] = in_seconds(wait_s)
                    await self._journal(call, [self._event(EventType.COMPENSATION_FAILED, call.step, said)])
                    continue
                tracing.compensation_ended(span, None)
            return result, attempt, None
        return None, retry.attempts, error

    async def _run_parts(
        self, call: CompensationCall, part: int, attempt: int, approval_id: str | None, trace: dict[str, str]
    ) -> tuple[JSON, int, str | None]:
        """Make the undo's calls from `part` on (journaling `compensating` before each after the first),
        then the verify check: the last call's answer, the part reached, and the error, if one failed."""
        compensate = self.options.compensate
        assert compensate is not None
        result: JSON = None
        payload: JSONObject = {}
        start = part
        while part < call.parts:
            if part > start:
                data = self._attempt_data(call, part, attempt, approval_id, trace)
                await self._journal(call, [self._event(EventType.COMPENSATING, call.step, data)])
            if self.lease is not None:
                await self.lease.aensure()  # stopped past the lease just now: call nothing
            payload = {**call.part_json(part), "attempt": attempt}
            try:
                result = to_json(await _call(compensate, payload))
            except Exception as exc:
                return None, part, _error_text(exc)
            part += 1
        try:
            if self.options.check_undo is not None and not await _call(self.options.check_undo, payload):
                raise AssertionError("the verify check did not confirm the undo")
        except Exception as exc:
            return None, part - 1, _error_text(exc)
        return result, part, None

    @staticmethod
    def _attempt_data(
        call: CompensationCall, part: int, attempt: int, approval_id: str | None, trace: dict[str, str]
    ) -> JSONObject:
        """What `compensating` journals of one call of the undo (its part, for an undo of several)."""
        sent = call.part_json(part)
        data: JSONObject = {"tool": sent["tool"], "args": sent["args"], "idempotency_key": sent["idempotency_key"],
                                "attempt": attempt}
        if call.then:
            data.update(part=part, parts=call.parts)
        if approval_id:
            data["approval_id"] = approval_id
        return data | trace

    async def _begin_attempt(
        self, call: CompensationCall, attempt: int, approval_id: str | None, trace: dict[str, str]
    ) -> int | None:
        """Journal `compensating` for one attempt, and return the call of the undo it starts at: the first
        not known done (0 for an undo of one call). None, journaling nothing, if the step is `compensated`
        by now. The run was read when the rollback began, and a remote worker whose claim ran out may
        still report its undo done until this write takes the step over; checking in the same write,
        under the run's lock, means the report and this attempt never both go in."""

        def begin(q: Queries) -> int | None:
            events = q.step_events(call.run_id, call.step)
            if derive_status(events) is StepStatus.COMPENSATED:
                return None
            part = min(parts_done(events), call.parts - 1)
            data = self._attempt_data(call, part, attempt, approval_id, trace)
            q.append(call.run_id, [self._event(EventType.COMPENSATING, call.step, data)])
            return part

        return await self._write(call.run_id, begin)

    async def _found_undone(self, snapshot: RunSnapshot, step: StepState, call: CompensationCall) -> bool:
        """For a step an interrupted rollback left `compensating` (its undo may or may not have taken
        effect): read back before sending the undo again, since not every API deduplicates on the key.
        True when the read-back shows the undone state, journaled `verified` (`found_undone`) and
        `compensated` without a call; False when there is no read-back to make or it does not show it,
        and the undo is sent again with the same key."""
        check, read_back = call.verification, self.options.read_back
        if check is None or read_back is None:
            return False
        try:
            ctx = reference_context(snapshot, step)
            arguments, expect = resolve(dict(check.args), ctx), resolve(dict(check.expect), ctx)
            answer, error = await read_once(read_back, check.tool, arguments)
        except Exception:  # no arguments, or no answer: nothing is known, so the undo goes again
            return False
        if first_mismatch(expect, answer, error) is not None:
            return False
        verified = self._verified(call, arguments, answer, error, found_undone=True)
        done = self._event(EventType.COMPENSATED, call.step, {"result": None, "attempts": step.attempts,
                                                              "found_undone": True})

        def settle(q: Queries) -> bool:  # a remote worker's late report may have settled it meanwhile
            if derive_status(q.step_events(call.run_id, call.step)) is StepStatus.COMPENSATED:
                return False
            q.append(call.run_id, [verified, done])
            return True

        return await self._write(call.run_id, settle)

    async def _read_back(
        self,
        snapshot: RunSnapshot,
        step: StepState,
        call: CompensationCall,
        result: JSON,
        attempts: int,
        report: RollbackReport,
        label: str,
    ) -> bool:
        """Run the declared read-back, if any, and journal the step's final outcome."""
        done = self._event(EventType.COMPENSATED, call.step, {"result": result, "attempts": attempts})
        ok_line = f"{label}  compensated -> {call.tools} ({_attempts(attempts)})"
        check = call.verification
        if check is None:
            await self._journal(call, [done])
        elif self.options.read_back is None:
            await self._journal(call, [self._event(EventType.UNVERIFIED, call.step, {"reason": NOT_VERIFIED}), done])
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
        assert self.options.read_back is not None
        check = call.verification
        ctx = reference_context(snapshot, step)
        try:
            arguments = resolve(dict(check.args), ctx)
            expect = resolve(dict(check.expect), ctx)
        except MissingReference as missing:
            await self._fail_verification(call, {"error": CANNOT_VERIFY, "missing": missing.ref}, CANNOT_VERIFY)
            return CANNOT_VERIFY
        mismatch, answer = "", None
        for i in range(check.retries + 1):
            if i:
                await self.sleep(check.backoff_ms * 2 ** (i - 1) / 1000)
            try:
                answer, error = await read_once(self.options.read_back, check.tool, arguments)
            except Exception as exc:
                mismatch, answer = f"read failed: {_error_text(exc)}", None
                continue
            found = first_mismatch(expect, answer, error)
            if found is None:
                await self._journal(call, [self._verified(call, arguments, answer, error), done])
                return None
            mismatch = found
        error = f"{VERIFICATION_FAILED}: {mismatch}"
        await self._fail_verification(
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

    def _verified(self, call: CompensationCall, arguments: LooseJSON, answer: JSON, error: str | None,
                  **extra: JSON) -> NewEvent:
        """The `verified` event of a read-back whose answer (or the read tool's own error) matched."""
        assert call.verification is not None
        data: JSONObject = {"tool": call.verification.tool, "arguments": arguments, "answer": answer} | extra
        return self._event(EventType.VERIFIED, call.step, data | ({"error": error} if error is not None else {}))

    async def _fail_verification(self, call: CompensationCall, data: JSONObject, error: str) -> None:
        await self._journal(
            call,
            [
                self._event(EventType.VERIFICATION_FAILED, call.step, data),
                self._event(EventType.COMPENSATION_FAILED, call.step, {"error": error}),
            ],
        )

    def _event(self, kind: EventType, step: int, data: JSONObject) -> NewEvent:
        principal, job = self.options.principal, self.options.job
        return NewEvent(kind, step, self.options.actor,
                        data | ({"principal": principal} if principal else {}) | ({"job": job} if job else {}))

    async def _journal(self, call: CompensationCall, events: list[NewEvent]) -> None:
        def append(q: Queries) -> None:
            q.append(call.run_id, events)

        await self._write(call.run_id, append)

    def _approval(self, q: Queries, call: CompensationCall) -> Approval:
        actor = self.options.actor
        return compensation_approval(
            q, call.run_id, call.step, call.tool, call.args,
            requested_by=actor, approve_pending=self.options.approve_compensations, actor=actor,
            principal=self.options.principal,
        )

    async def _write(self, run_id: str, fn: Callable[[Queries], T]) -> T:
        """Run `fn` in a write transaction that holds the run's row lock, off the event loop."""

        def locked(q: Queries) -> T:
            if self.lease is not None and self.lease.run_id == run_id:
                self.lease.check(q, lock_run=True)  # the run's lock and the check in one statement
            else:
                q.lock_run(run_id)
                if self.lease is not None:
                    self.lease.check(q)
            return fn(q)

        return await self.store.arun_write(locked, order=run_id)


async def read_once(read: ReadBack, tool: str, arguments: LooseJSON) -> tuple[JSON, str | None]:
    """One read: its answer as JSON, or (None, the read tool's own error answer), which `{$error: ...}`
    expects. Any other failure of the read raises."""
    try:
        return to_json(await _call(read, tool, arguments)), None
    except ToolAnsweredError as exc:
        return None, exc.message


def _attempts(n: int) -> str:
    return f"{n} attempt" if n == 1 else f"{n} attempts"


def _report_unchanged(action: Action, report: RollbackReport) -> None:
    """Report a step the rollback leaves as it is, with the walk's reason."""
    step, reason = action.step, action.reason or ""
    match action.kind:
        case ActionKind.SKIP:
            said = "skipped"
            report.skipped.append(step)
            if reason == Reason.ALREADY_COMPENSATED:
                report.already_undone.append(step)
        case ActionKind.UNRESOLVED:
            said = "unresolved"
            report.unresolved.append(step)
        case ActionKind.UNMANIFESTED:
            said = "unmanifested"
            report.unmanifested.append(step)
        case ActionKind.UNRECOVERABLE:
            said = "unrecoverable"
            report.unrecoverable.append(Unrecoverable(step, reason))
        case ActionKind.DEFER:
            said = "deferred"
            report.deferred.append(Deferred(step, action.blocked_by, action.blocked_by_runs))
        case ActionKind.COMPENSATE:
            raise AssertionError(f"step {step} is to be compensated, not reported unchanged")
        case unknown:
            assert_never(unknown)
    report.lines.append(f"step {step}  {action.tool}  {said}  {reason}")
