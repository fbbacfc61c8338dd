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
from typing import TYPE_CHECKING, Any, TypedDict, TypeVar, Unpack

from reversi.core.backoff import Retry
from reversi.core.manifest import ManifestSet
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
)
from reversi.core.plan import Plan
from reversi.core.planner import plan_rollback
from reversi.core.report import RollbackReport
from reversi.engine import tracing
from reversi.engine.remote import CompensationWork, begin_compensation, complete_compensation
from reversi.engine.rollback import Compensate, Progress, ReadBack, RollbackExecutor, RollbackOptions, UndoCheck
from reversi.errors import BadInput, Conflict, NotFound
from reversi.store.base import RunLock

if TYPE_CHECKING:
    from reversi.engine.ledger import Ledger

T = TypeVar("T")


class RollbackArguments(TypedDict, total=False):
    """The keyword options of `Run.rollback` and `Run.arollback`."""

    retry: Retry | Mapping[str, Any] | None
    verify: UndoCheck | None
    verifier: ReadBack | None
    approve_compensations: bool
    actor: str | None
    progress: Progress | None
    manifests: ManifestSet | None

_NO_RESULT: Any = object()


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


async def _take_lock(take: Callable[[], RunLock]) -> RunLock:
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


def _give_back(taking: asyncio.Future[RunLock]) -> None:
    if not taking.cancelled() and taking.exception() is None:
        taking.result().release()


def _uncertain(exc: BaseException) -> bool:
    """A timeout or a broken connection may have let the call take effect; so may an interruption
    (KeyboardInterrupt, task cancellation) that cut the call off in flight."""
    return isinstance(exc, (TimeoutError, ConnectionError)) or not isinstance(exc, Exception)


@dataclass(frozen=True)
class Outcome:
    """What a probe found out about an unresolved step: `succeeded` (with its result) or `failed`."""

    status: str
    result: Any = _NO_RESULT
    note: str | None = None


class StepHandle:
    """A journaled `intended` call waiting for its outcome. One that is never reported stays `intended`."""

    def __init__(self, run: Run, index: int) -> None:
        self.run = run
        self.index = index
        self._reporting = False  # whether it has journaled (or tried to) the outcome: an exception
        # since is the caller's own, or the journal's, and says nothing of the call

    def succeeded(self, result: Any = None) -> None:
        self._report(StepStatus.SUCCEEDED, result=result)

    def failed(self, error: object = None) -> None:
        self._report(StepStatus.FAILED, error=_text(error))

    def uncertain(self, error: object = None) -> None:
        self._report(StepStatus.UNCERTAIN, error=_text(error))

    def _report(self, status: StepStatus, *, result: Any = None, error: str | None = None) -> None:
        self._reporting = True
        self.run._ledger.recorder.outcome(self.run.record, self.index, status, result=result, error=error)
        tracing.ended(self.run.id, self.index, status.value)

    def _from_exception(self, exc: BaseException) -> None:
        """Journal what an exception says of the call, unless its outcome was reported already (the
        exception came after, and is the caller's own business) or reporting it failed: then the
        exception is the journal's own, says nothing of the call, and the step stays `intended`
        (unresolved) rather than being called `failed` after it may have worked."""
        if not self._reporting:
            (self.uncertain if _uncertain(exc) else self.failed)(exc)


def _step_number(step: object) -> int:
    if isinstance(step, (StepHandle, StepState)):
        return step.index
    if isinstance(step, bool) or not isinstance(step, int):
        raise BadInput(f"a step is a step number (an int from 0), not {step!r}")
    return step


def _text(error: object) -> str | None:
    if error is None:
        return None
    if isinstance(error, BaseException):
        return str(error) or type(error).__name__
    return str(error)


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

    def begin(self, tool: str, args: Any = None, depends_on: Sequence[int] = ()) -> StepHandle:
        """Journal `intended` and return the handle to report the outcome on.

        Raises:
            reversi.errors.Refused: a halt, the kill file, a duplicate, enforce mode or an approval
                stopped the call (journaled as `refused`); do not make the call.
        """
        index = self._ledger.recorder.begin(self.record, tool, {} if args is None else args, depends_on)
        tracing.began(self.id, index)
        return StepHandle(self, index)

    @contextmanager
    def step(self, tool: str, args: Any = None, depends_on: Sequence[int] = ()) -> Iterator[StepHandle]:
        """A block that makes the call: an exception marks it failed (uncertain for timeouts and
        connection errors) and is re-raised; report success with `step.succeeded(result)`."""
        with tracing.call_span(self.id, tool):
            handle = self.begin(tool, args, depends_on)
            try:
                yield handle
            except BaseException as exc:
                handle._from_exception(exc)
                raise

    def call(self, tool: str, args: Any, fn: Callable[..., Any], depends_on: Sequence[int] = ()) -> Any:
        """Journal, call `fn(**args)`, journal its result; returns what `fn` returned.

        Raises:
            BadInput: `args` is not a dict of named arguments (nothing is journaled then).
        """
        with self.step(tool, args, depends_on) as handle:
            result = awaited(fn(**(args or {})))
            handle.succeeded(result)
        return result

    async def acall(self, tool: str, args: Any, fn: Callable[..., Any], depends_on: Sequence[int] = ()) -> Any:
        """`call` for async code: `fn` may be a coroutine function; the journal writes run off the loop."""
        with tracing.call_span(self.id, tool):
            handle = await asyncio.to_thread(self.begin, tool, args, depends_on)
            try:
                result = fn(**(args or {}))
                if inspect.isawaitable(result):
                    result = await result
            except BaseException as exc:
                await asyncio.to_thread(handle._from_exception, exc)
                raise
            await asyncio.to_thread(handle.succeeded, result)
        return result

    # -- reading ---------------------------------------------------------------------------------

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

    def plan(self, manifests: ManifestSet | None = None) -> Plan:
        """The rollback plan with the manifests in force (those the ledger was opened with)."""
        return plan_rollback(self.snapshot(), manifests or self._ledger.manifests)

    async def arollback(
        self, compensate: Compensate | None = None, **options: Unpack[RollbackArguments]
    ) -> RollbackReport:
        """Roll the run back without blocking the event loop: every store read and write is awaited
        off it. See `rollback`."""
        executor = RollbackExecutor(
            self._ledger.store,
            options.get("manifests") or self._ledger.manifests,
            RollbackOptions(
                compensate=compensate,
                retry=Retry.of(options.get("retry")),
                verify=options.get("verify"),
                verifier=options.get("verifier"),
                approve_compensations=options.get("approve_compensations", False),
                actor=self._ledger.actor(options.get("actor")),
                progress=options.get("progress"),
            ),
        )
        lock = await _take_lock(functools.partial(self._ledger.store.lock_run, self.id))
        try:
            return await executor.execute(self.id)
        finally:
            await asyncio.shield(asyncio.to_thread(lock.release))

    def rollback(self, compensate: Compensate | None = None, **options: Unpack[RollbackArguments]) -> RollbackReport:
        """Undo the run's standing steps, newest first, and report what was and was not done.

        `compensate(call)` runs one undo (the call JSON as a dict). The keyword options:
        `retry`, a `Retry` or a mapping of its fields (`{"attempts": 3, "base_ms": 100, "max_ms": 2000}`);
        `verify(call)`, truthy when the undo is visible; `verifier(tool, arguments)`, which runs a
        declared read-back; `approve_compensations`, to grant pending compensation approvals as one
        decision of `actor`; `progress(done, total)`, told after each step; `manifests`, instead of
        the ledger's. Each callable may be async.

        Raises:
            RollbackInProgress: another rollback of this run is running.
            ConfigError: a step needs compensating and `compensate` is None.
        """
        return run_coroutine(self.arollback(compensate, **options))

    def resolve(
        self, step: int, status: str, result: Any = _NO_RESULT, note: str | None = None, actor: str | None = None
    ) -> StepState:
        """Settle an unresolved step as `succeeded` (with the result found) or `failed`.

        Raises:
            BadInput: a bad status, a result for a failed step, or a missing note.
            NotFound: no such step.
            Conflict: the step is not unresolved.
        """
        step = _step_number(step)
        if status not in ("succeeded", "failed"):
            raise BadInput(f"status must be succeeded or failed, not {status!r}")
        if status == "failed" and result is not _NO_RESULT:
            raise BadInput("a failed step has no result: pass one only to settle it as succeeded")
        if not note or not note.strip():
            raise BadInput("a note is required: say how you settled the step")
        data: dict[str, Any] = {"status": status, "note": note}
        if result is not _NO_RESULT:
            from reversi.core.json_values import checked_arguments

            data["result"] = checked_arguments(result, "result")
        who = self._ledger.actor(actor)
        with self._ledger.store.write() as q:
            events = q.step_events(self.id, step, lock_run=True) if isinstance(step, int) else []
            if not events:
                raise NotFound(f"no step {step} in {self.id}")
            current = derive_status(events)
            if not current.unresolved:
                raise Conflict(
                    f"step {step} of {self.id} is {current.value}: only intended or uncertain steps can be resolved"
                )
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
        result: Any = None,
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
