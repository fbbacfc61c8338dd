"""A run as the SDK hands it out: record calls, then plan, roll back, resolve and reconcile."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import functools
import inspect
from collections.abc import Awaitable, Callable, Coroutine, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypedDict, TypeVar, Unpack

from reversi.core import redaction
from reversi.core.backoff import Retry
from reversi.core.calls import making
from reversi.core.checkpoints import Checkpoint, RollbackScope, checkpoints_of, rollback_scope
from reversi.core.follow_ups import FollowUpState, follow_ups_of
from reversi.core.json_values import JSONObjectView, JSONView, LooseJSON, LooseJSONObject
from reversi.core.manifest import ManifestSet, Probe, ToolEntry
from reversi.core.models import (
    Event,
    EventType,
    NewEvent,
    RunRecord,
    RunSnapshot,
    StepState,
    StepStatus,
    derive_status,
    derive_step,
    settled_by_hand,
)
from reversi.core.plan import Plan
from reversi.core.planner import plan_rollback
from reversi.core.probes import Probed, judged
from reversi.core.references import resolve
from reversi.core.report import RollbackReport
from reversi.core.resolve_guide import missing_fields
from reversi.core.resources import RunLineage
from reversi.core.sensitive import Masker
from reversi.core.standing import RunStanding, run_standing
from reversi.core.walk import entry_of, reference_context
from reversi.engine import tracing
from reversi.engine.capture import Captured, needs_capture, take_capture
from reversi.engine.commands import command_read_back
from reversi.engine.lineage import lineage_secret, run_lineage
from reversi.engine.remote import CompensationWork, begin_compensation, complete_compensation
from reversi.engine.rollback import (
    CheckUndo,
    Compensate,
    Progress,
    ReadBack,
    RollbackExecutor,
    RollbackOptions,
    read_once,
)
from reversi.engine.step_handle import StepHandle, reporting
from reversi.errors import BadInput, CaptureFailed, Conflict, MissingReference, NotFound
from reversi.store.leases import Lease

if TYPE_CHECKING:
    from reversi.engine.ledger import Ledger

T = TypeVar("T")


class RollbackArguments(TypedDict, total=False):
    """The keyword options of `Run.rollback` and `Run.arollback`."""

    retry: Retry | Mapping[str, LooseJSON] | None
    verify: CheckUndo | None
    verifier: ReadBack | None
    approve_compensations: bool
    actor: str | None
    progress: Progress | None
    manifests: ManifestSet | None
    to: str | None
    after_step: int | None
    scope: RollbackScope | None  # the part of the run to undo, as a rollback of many runs gives it
    job: str | None  # the job it runs for (journaled with each of its events)
    clock: Callable[[], datetime] | None  # the time undo windows are judged by (default: the system's clock)
    deadline_first: bool  # take the steps whose undo windows close soonest first, never past a dependent
    follow_up: Callable[[LooseJSONObject], object] | None  # told of each follow-up opened (default: follow_up_cmd)
    concurrency: int  # how many independent steps are undone at once (default 1: one at a time)

_NO_RESULT = object()  # no value given, where None is a value


def _system_clock() -> datetime:
    return datetime.now(UTC)


def run_coroutine(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine to the end from sync code, even when an event loop is running in this thread."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(contextvars.copy_context().run, asyncio.run, coro).result()  # keeps the trace


def awaited(value: Any) -> Any:
    """`value`, or what it resolves to when a callable handed to sync code was async."""
    if not inspect.isawaitable(value):
        return value

    async def wait() -> Any:
        return await value

    return run_coroutine(wait())


async def _take_lock(take: Callable[[], Lease]) -> Lease:
    """A run's rollback lock, taken by `take()` in a thread. The thread cannot be stopped: cancelled while
    it works, this gives the lock back once the thread has it (before the cancellation goes on), so that
    a rollback that never started holds no run.

    Raises:
        RollbackInProgress: as `Store.lock_run`.
    """
    taking = asyncio.ensure_future(asyncio.to_thread(take))
    try:
        return await asyncio.shield(taking)
    except asyncio.CancelledError:
        taking.add_done_callback(_give_back)
        with contextlib.suppress(BaseException):  # its own failure, or a second cancellation: ours goes on
            await asyncio.shield(taking)
        raise


def _give_back(taking: asyncio.Future[Lease]) -> None:
    if not taking.cancelled() and taking.exception() is None:
        taking.result().release()


@dataclass(frozen=True)
class Outcome:
    """What a probe found out about an unresolved step: `succeeded` (with its result) or `failed`."""

    status: str
    result: LooseJSON = _NO_RESULT
    note: str | None = None


def _step_number(step: object) -> int:
    if isinstance(step, (StepHandle, StepState)):
        return step.index
    if isinstance(step, bool) or not isinstance(step, int):
        raise BadInput(f"a step is a step number (an int from 0), not {step!r}")
    return step


class Run:
    """One agent session's sequence of calls. Get one from `Ledger.start_run`."""

    def __init__(self, ledger: Ledger, record: RunRecord) -> None:
        self._ledger = ledger
        self.record = record

    @property
    def id(self) -> str:
        return self.record.run_id

    @property
    def mode(self) -> str:
        return self.record.mode.value

    @property
    def actor(self) -> str:
        return self.record.scope.actor

    @property
    def tenant(self) -> str:
        return self.record.scope.tenant

    @property
    def environment(self) -> str:
        return self.record.scope.environment

    @property
    def principal(self) -> str:
        return self.record.principal

    def __repr__(self) -> str:
        return f"<Run {self.id} mode={self.mode} actor={self.actor!r}>"

    # -- recording -------------------------------------------------------------------------------

    def begin(
        self, tool: str, args: LooseJSON = None, depends_on: Sequence[int] = (), *, before: LooseJSON = _NO_RESULT,
        call_id: str | None = None,
    ) -> StepHandle:
        """Journal `intended` and return the handle to report the outcome on. `before`: what you read
        before the call for the manifest entry's `capture` (`$before`); without it, a compensation or
        read-back that needs `$before` makes the step unrecoverable. `call_id`: the framework's id of the
        call, to report its outcome by later (`settle`).

        Raises:
            reversi.errors.Refused: a halt, the kill file, a duplicate, enforce mode or an approval
                stopped the call (journaled as `refused`); do not make the call.
        """
        captured = None if before is _NO_RESULT else Captured.supplied(before)
        return self._begin(tool, args, depends_on, captured, call_id)

    def _begin(self, tool: str, args: LooseJSON, depends_on: Sequence[int], before: Captured | None,
               call_id: str | None = None) -> StepHandle:
        index = self._ledger.recorder.begin(self.record, tool, {} if args is None else args, depends_on, before=before,
                                            call_id=call_id)
        tracing.began(self.id, index)
        return StepHandle(self, index)

    @contextmanager
    def step(
        self, tool: str, args: LooseJSON = None, depends_on: Sequence[int] = (), *, before: LooseJSON = _NO_RESULT
    ) -> Iterator[StepHandle]:
        """A block that makes the call: an exception marks it failed (uncertain for timeouts and
        connection errors) and is re-raised; report success with `step.succeeded(result)`."""
        with tracing.call_span(self.id, tool), reporting(self.begin(tool, args, depends_on, before=before)) as handle,\
                making(self.id, handle.index):
            yield handle

    def call(
        self, tool: str, args: LooseJSON, fn: Callable[..., Any], depends_on: Sequence[int] = (), *,
        capture: ReadBack | None = None, call_id: str | None = None, pauses: tuple[type[BaseException], ...] = (),
    ) -> Any:
        """Journal, call `fn(**args)`, journal its result; returns what `fn` returned.

        When the tool's manifest entry has a `capture`, `capture(tool, arguments)` (or, without it, the
        ledger's reader command, `reader_cmd`) reads first; a capture that fails refuses the call.
        With neither, nothing is read, and the plan names `$before` as unavailable for the step.
        `call_id` and `pauses`: for a call a framework may pause and resume, as `acall`.

        Raises:
            BadInput: `args` is not a dict of named arguments (nothing is journaled then).
            CaptureFailed: the capture failed (journaled as `refused`); `fn` was not called.
        """
        paused = self._open_step(call_id, tool, args) if call_id is not None else None
        how = self._reader(tool, args, capture) if paused is None else None
        before = run_coroutine(self._capture(tool, args, how)) if how else None
        with tracing.call_span(self.id, tool):
            handle = StepHandle(self, paused.index) if paused is not None else self._begin(
                tool, args, depends_on, before, call_id)
            try:
                with making(self.id, handle.index):
                    result = awaited(fn(**(args or {})))
            except pauses:
                raise  # the step stays open: the framework resumes the call, or its answer is settled later
            except BaseException as exc:
                handle._from_exception(exc)
                raise
            handle.succeeded(result)
        return result

    def _reader(self, tool: str, args: LooseJSON, capture: ReadBack | None) -> tuple[ToolEntry, ReadBack] | None:
        """The entry and the reader to capture this call with, when it needs a capture and one can read."""
        entry = self._ledger.manifests.lookup(tool)
        if entry is None or not isinstance(args, Mapping) or not needs_capture(entry, self.record, args):
            return None
        read = capture or (command_read_back(cmd) if (cmd := self._ledger.settings.reader_cmd) else None)
        return (entry, read) if read is not None else None

    async def _capture(self, tool: str, args: LooseJSON, how: tuple[ToolEntry, ReadBack] | None) -> Captured | None:
        if how is None:
            return None
        try:
            return await take_capture(how[0], self.record, args, how[1],
                                      stopped=lambda: self._ledger.astopped(self.record, tool))
        except CaptureFailed as refusal:
            await asyncio.to_thread(self._ledger.recorder.refuse, self.record, tool, args, refusal)
            raise  # refuse raised already

    async def acall(
        self, tool: str, args: LooseJSON, fn: Callable[..., Any], depends_on: Sequence[int] = (), *,
        capture: ReadBack | None = None, call_id: str | None = None, pauses: tuple[type[BaseException], ...] = (),
    ) -> Any:
        """`call` for async code: `fn` and `capture` may be coroutine functions; the journal writes run off the loop.

        For a framework whose calls can pause (wait for an approval, or be deferred to be answered later):
        `call_id` is the framework's id of the call, journaled with it; an exception of a type in `pauses`
        leaves the step open (`intended`: unresolved until something says how it went) rather than
        failed. A later call with the same `call_id`, tool and arguments (the framework resuming it)
        continues that step instead of journaling a new one; `settle` reports one answered elsewhere.
        """
        paused = await asyncio.to_thread(self._open_step, call_id, tool, args) if call_id is not None else None
        before = None if paused is not None else await self._capture(tool, args, self._reader(tool, args, capture))
        with tracing.call_span(self.id, tool):
            handle = StepHandle(self, paused.index) if paused is not None else await asyncio.to_thread(
                self._begin, tool, args, depends_on, before, call_id)
            try:
                with making(self.id, handle.index):
                    result = fn(**(args or {}))
                    if inspect.isawaitable(result):
                        result = await result
            except pauses:
                raise  # the step stays open: the framework resumes the call, or its answer is settled later
            except BaseException as exc:
                await asyncio.to_thread(handle._from_exception, exc)
                raise
            await asyncio.to_thread(handle.succeeded, result)
        return result

    def _open_step(self, call_id: str, tool: str, args: LooseJSON) -> StepState | None:
        """The step a paused call of this tool with these arguments left open, by the framework's call id."""
        return next((s for s in self.snapshot().steps if s.call_id == call_id and s.tool == tool
                     and s.status is StepStatus.INTENDED and s.args == args), None)

    def settle(self, call_id: str, *, result: object = None, error: str | None = None) -> StepState:
        """Report how a paused call went when its answer came from elsewhere (a deferred tool answered by
        the application): `succeeded` with `result`, or `failed` with `error`. Returns the step.

        Raises:
            NotFound: no open step of this run has that call id.
        """
        open_step = next((s for s in self.snapshot().steps if s.call_id == call_id and s.status is StepStatus.INTENDED),
                         None)
        if open_step is None:
            raise NotFound(f"no open step of {self.id} has call id {call_id!r}")
        handle = StepHandle(self, open_step.index)
        if error is not None:
            handle.failed(error)
        else:
            handle.succeeded(result)
        return self.snapshot().step(open_step.index)

    async def asettle(self, call_id: str, *, result: object = None, error: str | None = None) -> StepState:
        """`settle` off the event loop."""
        return await asyncio.to_thread(lambda: self.settle(call_id, result=result, error=error))

    def checkpoint(self, name: str) -> Checkpoint:
        """Journal a checkpoint after the run's last step, to roll back to later (`plan(to=name)`,
        `rollback(to=name)`: only the steps recorded after it are undone).

        Raises:
            BadInput: the name is not 1-200 printable characters.
            Conflict: the run has a checkpoint of that name already.
        """
        return self._ledger.recorder.checkpoint(self.record, name)

    async def acheckpoint(self, name: str) -> Checkpoint:
        """`checkpoint` for async code: the journal write runs off the loop."""
        return await asyncio.to_thread(self.checkpoint, name)

    # -- reading ---------------------------------------------------------------------------------

    def checkpoints(self) -> list[Checkpoint]:
        """The run's checkpoints, oldest first."""
        with self._ledger.store.read() as q:
            return checkpoints_of(q.checkpoint_events(self.id))

    def scope(self, *, to: object = None, after_step: object = None) -> RollbackScope | None:
        """The part of the run after checkpoint `to`, or after step `after_step`; None for neither
        (the whole run). See `reversi.core.checkpoints.rollback_scope`.

        Raises:
            BadInput: both are given, or one is malformed.
            NotFound: no checkpoint of that name, or no such step.
        """
        if to is None and after_step is None:
            return None
        with self._ledger.store.read() as q:
            found = checkpoints_of(q.checkpoint_events(self.id)) if to is not None else []
            steps = q.step_count(self.id)
        return rollback_scope(found, steps, self.id, to=to, after_step=after_step)

    def snapshot(self) -> RunSnapshot:
        with self._ledger.store.read() as q:
            snap = q.snapshot(self.id)
        if snap is None:
            raise NotFound(f"no run {self.id}")
        return snap

    def step_state(self, index: int) -> StepState:
        """One step's current state, read without the rest of the run.

        Raises:
            NotFound: no such step.
        """
        with self._ledger.store.read() as q:
            record = q.step_record(self.id, index)
            events = q.step_events(self.id, index) if record is not None else []
        if record is None:
            raise NotFound(f"no step {index} in {self.id}")
        return derive_step(record, events)

    def steps(self) -> tuple[StepState, ...]:
        return self.snapshot().steps

    def events(self) -> list[Event]:
        with self._ledger.store.read() as q:
            return q.run_events(self.id)

    # -- operating -------------------------------------------------------------------------------

    def missing_from_result(self, step: int, result: LooseJSON) -> list[str]:
        """The `$result` references step `step`'s undo needs (by the manifests in force) that `result`
        does not give: settled as succeeded with this result, the step could never be undone.

        Raises:
            NotFound: no such step.
        """
        snapshot = self.snapshot()
        if not 0 <= step < len(snapshot.steps):
            raise NotFound(f"no step {step} in {self.id}")
        return missing_fields(self._ledger.manifests, snapshot, step, result)

    def plan(self, manifests: ManifestSet | None = None, *, to: str | None = None,
             after_step: int | None = None, now: datetime | None = None, deadline_first: bool = False) -> Plan:
        """The rollback plan with the manifests in force (those the ledger was opened with); with `to`
        (a checkpoint's name) or `after_step`, of the steps after it only; undo windows judged at `now`
        (default: the clock's now); with `deadline_first`, in the order such a rollback takes them. Raises as
        `scope`."""
        scope = self.scope(to=to, after_step=after_step)
        manifests = manifests or self._ledger.manifests
        snapshot, lineage = self.snapshot_and_lineage(manifests)
        return plan_rollback(snapshot, manifests, scope, lineage, now or datetime.now(UTC),
                             deadline_first=deadline_first)

    async def aplan(self, manifests: ManifestSet | None = None, *, to: str | None = None,
                    after_step: int | None = None) -> Plan:
        """`plan` off the event loop."""
        return await asyncio.to_thread(lambda: self.plan(manifests, to=to, after_step=after_step))

    async def asteps(self) -> tuple[StepState, ...]:
        """`steps` off the event loop."""
        return await asyncio.to_thread(self.steps)

    async def aevents(self) -> list[Event]:
        """`events` off the event loop."""
        return await asyncio.to_thread(self.events)

    def standing(self, masker: Masker | None = None) -> RunStanding:
        """Where the run stands across every rollback that touched it (`reversi.core.standing`); with
        `masker`, as it may be shown (it learns the run's sensitive values from the same read)."""
        manifests = self._ledger.manifests
        snapshot, lineage = self.snapshot_and_lineage(manifests)
        found = run_standing(snapshot, self.events(),
                             plan_rollback(snapshot, manifests, lineage=lineage, now=datetime.now(UTC)))
        return found if masker is None else redaction.standing(redaction.learn(masker, snapshot.steps), found)

    def snapshot_and_lineage(self, manifests: ManifestSet | None = None) -> tuple[RunSnapshot, RunLineage]:
        """The run and what depends on its steps through their resources, read together."""
        secret = lineage_secret(self._ledger.store)
        with self._ledger.store.read() as q:
            snap = q.snapshot(self.id)
            if snap is None:
                raise NotFound(f"no run {self.id}")
            return snap, run_lineage(q, snap, manifests or self._ledger.manifests, secret)

    async def arollback(
        self, compensate: Compensate | None = None, **options: Unpack[RollbackArguments]
    ) -> RollbackReport:
        """Roll the run back without blocking the event loop: every store read and write is awaited
        off it. See `rollback`."""
        scope = options.get("scope") or await asyncio.to_thread(
            self.scope, to=options.get("to"), after_step=options.get("after_step"))
        executor = RollbackExecutor(
            self._ledger.store,
            options.get("manifests") or self._ledger.manifests,
            RollbackOptions(
                compensate=compensate,
                retry=Retry.of(options.get("retry")),
                check_undo=options.get("verify"),
                read_back=options.get("verifier"),
                approve_compensations=options.get("approve_compensations", False),
                actor=self._ledger.actor(options.get("actor")),
                principal=self._ledger.principal,
                progress=options.get("progress"),
                job=options.get("job"),
                deadline_first=options.get("deadline_first", False),
                concurrency=options.get("concurrency", 1),
                clock=options.get("clock") or _system_clock,
                follow_up=options.get("follow_up") or self._ledger.follow_up_hook(),
            ),
        )
        lock = await _take_lock(
            functools.partial(self._ledger.store.lock_run, self.id, self._ledger.settings.rollback_lease_s))
        executor.lease = lock
        try:
            return await executor.execute(self.id, scope)
        finally:
            await asyncio.shield(asyncio.to_thread(lock.release))

    def rollback(self, compensate: Compensate | None = None, **options: Unpack[RollbackArguments]) -> RollbackReport:
        """Undo the run's standing steps, newest first, and report what was and was not done.

        `compensate(call)` runs one undo (the call JSON as a dict). The keyword options:
        `retry`, a `Retry` or a mapping of its fields (`{"attempts": 3, "base_ms": 100, "max_ms": 2000}`);
        `verify(call)`, truthy when the undo is visible; `verifier(tool, arguments)`, which runs a
        declared read-back; `approve_compensations`, to grant pending compensation approvals as one
        decision of `actor`; `progress(done, total)`, told after each step; `manifests`, instead of
        the ledger's; `to` (a checkpoint's name) or `after_step` (a step number), to undo only the steps
        after it and keep the earlier ones; `deadline_first`, to take the steps whose undo windows close
        soonest first (never one while a step that depends on it stands); `concurrency`, to undo up to
        that many independent steps at once (1-64; default 1, one at a time; never a step while one that
        depends on it stands; sync callables then run in threads); `clock()`, the time undo windows are
        judged by. Each callable may be async.

        Raises:
            BadInput, NotFound: as `scope`.
            RollbackInProgress: another rollback of this run is running.
            ConfigError: a step needs compensating and `compensate` is None.
            Fenced: this process was stopped past its lease and another took the rollback over.
        """
        return run_coroutine(self.arollback(compensate, **options))

    async def aresolve(
        self, step: int, status: str, result: LooseJSON = _NO_RESULT, note: str | None = None,
        actor: str | None = None
    ) -> StepState:
        """`resolve` off the event loop."""
        return await asyncio.to_thread(self.resolve, step, status, result, note, actor)

    def resolve(
        self, step: int, status: str, result: LooseJSON = _NO_RESULT, note: str | None = None,
        actor: str | None = None, *, _read: JSONObjectView | None = None,
    ) -> StepState:
        """Settle an unresolved step as `succeeded` (with the result found) or `failed`; or correct a step
        settled so before any undo of it was tried (journaled as a `resolved` with `correction: true`).

        Raises:
            BadInput: a bad status, a result for a failed step, or a missing note.
            NotFound: no such step.
            Conflict: the step is neither unresolved nor settled by hand (or an undo of it was tried since).
        """
        step = _step_number(step)
        if status not in ("succeeded", "failed"):
            raise BadInput(f"status must be succeeded or failed, not {status!r}")
        if status == "failed" and result is not _NO_RESULT:
            raise BadInput("a failed step has no result: pass one only to settle it as succeeded")
        if not note or not note.strip():
            raise BadInput("a note is required: say how you settled the step")
        data: dict[str, JSONView] = {"status": status, "note": note, "principal": self._ledger.principal}
        if _read is not None:  # the probe's read that settled it: its tool, arguments and answer (sealed)
            data.update(_read)
        if result is not _NO_RESULT:
            from reversi.core.json_values import checked_arguments

            data["result"] = checked_arguments(result, "result")
        who = self._ledger.actor(actor)
        with self._ledger.store.write() as q:
            events = q.step_events(self.id, step, lock_run=True)
            if not events:
                raise NotFound(f"no step {step} in {self.id}")
            current = derive_status(events)
            if not current.unresolved and _read is not None:  # a probe settles what nobody has settled since
                raise Conflict(f"step {step} of {self.id} was settled meanwhile: it is {current.value}")
            if not current.unresolved and not settled_by_hand(events):
                raise Conflict(
                    f"step {step} of {self.id} is {current.value}: only intended or uncertain steps can be resolved"
                    " (or one settled by hand, to correct it, before any undo of it)"
                )
            if not current.unresolved:
                data["correction"] = True
            q.append(self.id, [NewEvent(EventType.RESOLVED, step, who, data)])
        return self.step_state(step)

    def reconcile(
        self, probe: Callable[[StepState], Outcome | Awaitable[Outcome | None] | None], actor: str | None = None
    ) -> list[int]:
        """Ask `probe` about each unresolved step and settle those it answers; returns the settled steps."""
        settled = []
        for state in self.steps():
            if not state.status.unresolved:
                continue
            outcome = awaited(probe(state))
            if outcome is None:
                continue
            self.resolve(state.index, outcome.status, outcome.result, outcome.note or "settled by a probe", actor)
            settled.append(state.index)
        return settled

    def follow_ups(self, masker: Masker | None = None) -> list[FollowUpState]:
        """The follow-ups rollbacks opened for steps they left in the world (`reversi.core.follow_ups`);
        with `masker`, as they may be shown (it learns the run's sensitive values first)."""
        found = follow_ups_of(self.id, self.events())
        if masker is None:
            return found
        redaction.learn(masker, self.steps())
        return [redaction.follow_up(masker, f) for f in found]

    def close_follow_up(self, step: int, note: str, actor: str | None = None) -> FollowUpState:
        """Close the follow-up of `step`, saying what was done (`note`), as `actor`.

        Raises:
            BadInput: no note.
            NotFound: the step has no follow-up.
            Conflict: it is closed already.
        """
        step = _step_number(step)
        if not isinstance(note, str) or not note.strip():
            raise BadInput("a note is required: say what was done")
        with self._ledger.store.write() as q:
            events = q.step_events(self.id, step, lock_run=True)
            found = follow_ups_of(self.id, events)
            if not found:
                raise NotFound(f"step {step} of {self.id} has no follow-up")
            if found[0].status == "closed":
                raise Conflict(f"the follow-up of step {step} of {self.id} was closed by {found[0].closed_by} at "
                               f"{found[0].closed_at}")
            data = {"follow_up_id": found[0].follow_up_id, "note": note, "principal": self._ledger.principal}
            q.append(self.id, [NewEvent(EventType.FOLLOW_UP_CLOSED, step, self._ledger.actor(actor), data)])
            return follow_ups_of(self.id, q.step_events(self.id, step))[0]

    def reconcile_by_probes(self, read_back: ReadBack, actor: str | None = None) -> list[Probed]:
        """Settle each `intended` or `uncertain` step whose manifest entry declares a `probe` from what
        `read_back(tool, arguments)` answers (`reversi.core.probes`): journaled `resolved` by `actor` (default
        `probe`) with the read; the others stay as they are. Returns what each probe said, newest first.
        `read_back` may be async."""
        found: list[Probed] = []
        snapshot = self.snapshot()
        for state in reversed(snapshot.steps):
            if not state.status.unresolved:
                continue
            entry = entry_of(self._ledger.manifests, state)
            probe = entry.probe if entry is not None else None
            if probe is None:
                found.append(Probed(state.index, state.tool, "unresolved", "its manifest entry declares no probe"))
                continue
            found.append(self._probed(snapshot, state, probe, read_back, actor or "probe"))
        return found

    def _probed(self, snapshot: RunSnapshot, state: StepState, probe: Probe, read_back: ReadBack,
                actor: str) -> Probed:
        ctx = reference_context(snapshot, state)
        answer, error = None, None
        try:
            arguments = resolve(dict(probe.args), ctx)
        except MissingReference as missing:
            return Probed(state.index, state.tool, "unresolved", f"its probe's {missing.ref} names nothing")
        try:
            with making(self.id, state.index):  # a connector's probe answers for this step alone (its seal)
                answer, error = awaited(read_once(read_back, probe.tool, arguments))
        except Exception as exc:
            return Probed(state.index, state.tool, "unresolved", f"its probe {probe.tool} could not read: "
                                                                  f"{type(exc).__name__}: {exc}"[:300])
        try:
            said = judged(probe, ctx, answer, error)
        except MissingReference as missing:
            said = f"its probe's {missing.ref} names nothing in the answer"
        if isinstance(said, str):
            return Probed(state.index, state.tool, "unresolved", f"{probe.tool}: {said}")
        status, result = said
        read = {"probe": probe.tool, "arguments": arguments, "answer": answer} | ({"error": error} if error else {})
        note = f"settled by its probe {probe.tool}"
        try:
            if status == "succeeded":
                self.resolve(state.index, status, result, note, actor, _read=read)
            else:
                self.resolve(state.index, status, note=note, actor=actor, _read=read)
        except Conflict as settled:  # someone settled it while the probe read: theirs stands
            return Probed(state.index, state.tool, "settled meanwhile", f"{settled.message}; left as it is")
        shown = "took effect" if status == "succeeded" else "did not take effect"
        return Probed(state.index, state.tool, status, f"{probe.tool} answered that it {shown}")

    def begin_compensation(
        self, step: int | StepHandle | StepState, lease_s: float = 300, worker: str | None = None
    ) -> CompensationWork:
        """Claim one standing step for a remote worker; see `reversi.engine.remote`."""
        index = _step_number(step)
        return begin_compensation(
            self._ledger.store,
            self._ledger.manifests,
            self.id,
            index,
            lease_s=lease_s,
            worker=worker or self._ledger.actor(None),
        )

    def complete_compensation(
        self,
        work: CompensationWork,
        ok: bool,
        result: object = None,
        error: str | None = None,
        verified: bool | None = None,
        actor: str | None = None,
    ) -> StepStatus:
        """Report how a claimed compensation went: `compensated`, or `compensation_failed`."""
        return complete_compensation(
            self._ledger.store,
            work,
            ok=ok,
            result=result,
            error=error,
            verified=verified,
            actor=self._ledger.actor(actor),
        )
