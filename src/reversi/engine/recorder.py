"""Journaling a call: every refusal before `intended`, then `intended`, then the outcome.

A call is checked, in order, against the kill file, the halts, enforce mode, forward duplicates
and forward approvals. The first that stops it is journaled as `refused` and raised; nothing is
called. The checks that read the store run in the same write transaction as the `intended` they
guard, so two processes racing for the same idempotency key or approval cannot both pass.

Durability `full` (the default) commits the outcome before `outcome` returns. Durability `intent`
hands it to the store to commit soon (`Store.defer_write`): the call's one waited-for commit is its
`intended`, and a crash before the outcome commits leaves the step `intended`, unresolved. The
outcome is queued ahead of any later write of this process, so the run's events keep their order.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn, TypeVar

from reversi.core.answers import TextAnswer
from reversi.core.checkpoints import Checkpoint, check_name, checkpoints_of, new_checkpoint_data
from reversi.core.expect import rule_holds
from reversi.core.halts import halt_message, matching_halt
from reversi.core.json_values import (
    JSON,
    JSONObject,
    JSONObjectView,
    JSONView,
    checked_arguments,
    digest,
    to_json,
    valid_text,
)
from reversi.core.manifest import ManifestSet, ToolEntry
from reversi.core.models import (
    ApprovalKind,
    ApprovalStatus,
    Event,
    EventType,
    Mode,
    NewEvent,
    RunRecord,
    RunSnapshot,
    StepRecord,
    StepState,
    StepStatus,
    derive_status,
    derive_step,
    is_call_id,
    utc_now,
)
from reversi.core.references import resolve
from reversi.core.resources import resource_key, resources_of
from reversi.core.walk import reference_context
from reversi.engine import tracing
from reversi.engine.approvals import new_approval_id
from reversi.engine.capture import Captured, call_context
from reversi.engine.halts import read_kill_file
from reversi.errors import (
    ApprovalDenied,
    ApprovalRequired,
    BadInput,
    Conflict,
    Duplicate,
    Forbidden,
    Halted,
    KeepWrites,
    MissingReference,
    NoManifestEntry,
    NotFound,
    Refused,
)
from reversi.store.approvals import ApprovalRow
from reversi.store.base import Store
from reversi.store.queries import Queries

T = TypeVar("T")
WriteFn = Callable[[Queries], T]


@dataclass(frozen=True)
class Recorder:
    """Journals the calls of runs in one store, under one set of manifests."""

    store: Store
    manifests: ManifestSet
    kill_file: str | None = None
    durability: str = "full"  # or "intent": outcomes are not waited for (see the module's docstring)

    def kill_reason(self) -> str | None:
        """The kill file's reason when it exists (`""` when it is empty), else None."""
        if not self.kill_file:
            return None
        try:
            return read_kill_file(Path(self.kill_file))
        except OSError as exc:
            return f"kill file unreadable: {exc}"

    def begin(
        self, run: RunRecord, tool: str, args: object, depends_on: Sequence[int] = (), *,
        before: Captured | None = None, call_id: str | None = None,
    ) -> int:
        """Journal `intended` for a new call (with what its capture read, `before`, and the framework's id
        of the call, `call_id`) and return its step number.

        Raises:
            Halted, Duplicate, NoManifestEntry, ApprovalRequired, ApprovalDenied: the call is refused
                (and journaled as `refused`); nothing may be called.
            BadInput: the tool, arguments or `depends_on` are not acceptable.
        """
        return self.store.run_write(
            self.begin_write(run, tool, args, depends_on, before=before, call_id=call_id), run.run_id,
            reads_halts=True
        )

    def refuse(self, run: RunRecord, tool: str, args: object, refusal: Refused) -> NoReturn:
        """Journal a call refused before any check (its capture failed) as `refused`, and raise `refusal`."""
        self.store.run_write(self._refuse_write(run, tool, args, refusal), run.run_id)
        raise refusal

    async def arefuse(
        self, run: RunRecord, tool: str, args: object, refusal: Refused
    ) -> NoReturn:
        """`refuse` for an event loop."""
        await self.store.arun_write(self._refuse_write(run, tool, args, refusal), run.run_id)
        raise refusal

    def _refuse_write(self, run: RunRecord, tool: str, args: object, refusal: Refused) -> WriteFn[None]:
        event = _refused_event(run, tool, checked_arguments(args) if isinstance(args, Mapping) else {}, refusal)

        def write(q: Queries) -> None:
            q.append(run.run_id, [event])

        return write

    async def abegin(
        self,
        run: RunRecord,
        tool: str,
        args: object,
        depends_on: Sequence[int] = (),
        *,
        via: Mapping[str, JSON] | None = None,
        before: Captured | None = None,
    ) -> int:
        """`begin` for an event loop: the write joins the group commit without blocking the loop; `via`,
        where the call goes (the gateway's upstream), is kept in the `intended` event's data as `upstream`."""
        write = self.begin_write(run, tool, args, depends_on, via=via, before=before)
        return await self.store.arun_write(write, run.run_id, reads_halts=True)

    def begin_write(
        self,
        run: RunRecord,
        tool: str,
        args: object,
        depends_on: Sequence[int] = (),
        *,
        via: Mapping[str, JSON] | None = None,
        before: Captured | None = None,
        call_id: str | None = None,
    ) -> WriteFn[int]:
        """`begin` as a write function, for a caller that runs it in its own transaction (with
        `Store.run_write(..., reads_halts=True)`, or in `Store.write_holding_halts`).

        The function raises a refusal as `KeepWrites(refusal)`, so that its `refused` event lands.

        Raises:
            BadInput: the tool, arguments or `depends_on` are not acceptable (before any write).
        """
        if not isinstance(tool, str) or not tool:
            raise BadInput("tool must be a non-empty string")
        if not isinstance(args, Mapping):  # named, as over HTTP and MCP: what a compensation's `$args.X` reads
            raise BadInput(f"args must be an object of named arguments, not {type(args).__name__}")
        args = checked_arguments(args)
        depends = _checked_depends_on(depends_on)
        entry = self.manifests.lookup(tool)
        kill, trace = self.kill_reason(), tracing.journal_fields()  # the caller's span, before any thread hop
        extra = dict(trace) | (before.journal() if before is not None else {}) | _call_id(call_id)
        return lambda q: self._journal_call(q, run, tool, args, depends, entry, kill, extra, via)

    def _journal_call(
        self,
        q: Queries,
        run: RunRecord,
        tool: str,
        args: JSON,
        depends: tuple[int, ...],
        entry: ToolEntry | None,
        kill: str | None,
        extra: JSONObjectView,
        via: Mapping[str, JSON] | None = None,
    ) -> int:
        """Inside one write: every check that reads the store, then `refused` or the new step's `intended`."""
        halted = self._halted(q, run, tool)  # also takes the run's write lock: always first
        refusal: Refused | None = Halted(halt_message(kill)) if kill is not None else None
        # A server's declaration is no manifest: enforce mode wants one the operator wrote.
        refusal = refusal or halted or _unmanifested(run, tool, self.manifests.written(tool))
        dup_key = _dup_key(run, tool, args, entry)
        refusal = refusal or (_duplicate(q, dup_key) if dup_key else None)
        approval_id = None
        ctx = call_context(run, args) if entry is not None else None  # an unmanifested call has no rule to judge
        if refusal is None and ctx is not None and entry is not None and rule_holds(entry.requires_approval, ctx):
            refusal, approval_id = _forward_approval(q, run, tool, args)
        if refusal is not None:
            q.append(run.run_id, [_refused_event(run, tool, args, refusal, _trace_of(extra))])
            raise KeepWrites(refusal)
        # Snapshotted for the step: whether an undo of it needs an approval (any alternative's, for these
        # arguments), so a later edit of the manifest cannot take the approval away.
        needs_approval = entry is not None and ctx is not None and any(
            rule_holds(c.requires_approval, ctx) for c in entry.compensations)
        record = q.insert_next_step(
            StepRecord(
                run.run_id,
                -1,
                tool,
                args,
                depends,
                compensation_needs_approval=needs_approval,
                manifest_digest=entry.digest if entry else None,
                dup_key=dup_key,
            )
        )
        step = record.step
        bad = [d for d in depends if d >= step]
        if bad:  # raising undoes this write's insert
            raise BadInput(f"depends_on: step {bad[0]} is not an earlier step of {run.run_id}")
        data: dict[str, JSONView] = {
            "tool": tool,
            "args": args,
            "depends_on": list(depends),
            "manifested": entry is not None,
            **extra,
        }
        if approval_id:
            data["approval_id"] = approval_id
        if via is not None:
            data["upstream"] = dict(via)
        if entry is not None and entry.declaration is not None:  # planned from the journal, not a manifest
            data["declared_undo"] = dict(entry.declaration)
        q.append(run.run_id, [NewEvent(EventType.INTENDED, step, _who(run), data)])
        return step

    def outcome(
        self, run: RunRecord, step: int, status: StepStatus, *, result: object = None, error: str | None = None
    ) -> None:
        """Journal what a call did: `succeeded` with its result, `failed` or `uncertain` with an error.
        With durability `intent` it returns before the commit, and the two errors below are logged
        rather than raised.

        Raises:
            NotFound: no such step.
            Conflict: the step already has an outcome.
        """
        write = self._outcome_write(run, step, status, result, error)
        if self.durability == "intent":
            self.store.defer_write(write, run.run_id)
        else:
            self.store.run_write(write, run.run_id)

    async def aoutcome(
        self,
        run: RunRecord,
        step: int,
        status: StepStatus,
        *,
        result: object = None,
        error: str | None = None,
    ) -> None:
        """`outcome` for an event loop: the write joins the group commit without blocking the loop."""
        write = self._outcome_write(run, step, status, result, error)
        if self.durability == "intent":
            self.store.defer_write(write, run.run_id)
        else:
            await self.store.arun_write(write, run.run_id)

    def outcome_write(
        self, run: RunRecord, step: int, status: StepStatus, *, result: object = None, error: str | None = None,
        reported: bool = False,
    ) -> WriteFn[StepState]:
        """`outcome` as a write function that also returns the step's new state, for a caller that runs
        it in its own transaction. `reported`: the outcome is the caller's word (an agent over HTTP), not
        what the gateway saw, so a step the gateway called is refused.

        Raises:
            Forbidden: `reported`, of a step the gateway called (it journals that outcome itself).
        """
        event = _outcome_event(run, step, status, result, error)

        secret = self._resource_secret()

        def write(q: Queries) -> StepState:
            events = _journal_outcome(q, run.run_id, step, event, reported=reported)
            record = q.step_record(run.run_id, step)
            assert record is not None  # it has events
            state = derive_step(record, events)
            self._journal_touches(q, run, state, events[-1].at, secret)
            return state

        return write

    def _outcome_write(
        self, run: RunRecord, step: int, status: StepStatus, result: object, error: str | None
    ) -> WriteFn[list[Event]]:
        event = _outcome_event(run, step, status, result, error)
        secret = self._resource_secret()

        def write(q: Queries) -> list[Event]:
            events = _journal_outcome(q, run.run_id, step, event)
            intended = events[0].data
            if secret is not None and self.manifests.touches(intended.get("tool", "")):
                record = StepRecord(run.run_id, step, intended["tool"], intended.get("args"))  # all a template reads
                self._journal_touches(q, run, derive_step(record, events), events[-1].at, secret)
            return events

        return write

    def _resource_secret(self) -> bytes | None:
        """The key resources are hashed under, when some entry declares resources (else None: no cost)."""
        return self.store.secret("masking") if self.manifests.declares_resources else None

    def _journal_touches(self, q: Queries, run: RunRecord, state: StepState, at: str, secret: bytes | None) -> None:
        """Index the resources a step that took (or may have taken) effect touched, for lineage."""
        if secret is None or state.status not in (StepStatus.SUCCEEDED, StepStatus.UNCERTAIN):
            return
        entry = self.manifests.lookup(state.tool)
        if entry is None or not entry.resources:
            return
        snapshot = RunSnapshot(run, (state,))
        ctx = reference_context(snapshot, state)
        tenant = run.scope.tenant
        q.add_touches(run.run_id, state.index, at, [resource_key(secret, tenant, r) for r in resources_of(entry, ctx)])

    def checkpoint(self, run: RunRecord, name: object) -> Checkpoint:
        """Journal a checkpoint named `name` after the run's last step (see `reversi.core.checkpoints`).

        Raises:
            BadInput: the name is not 1-200 printable characters.
            Conflict: the run has a checkpoint of that name already.
        """
        return self.store.run_write(self.checkpoint_write(run, name), run.run_id)

    def checkpoint_write(self, run: RunRecord, name: object) -> WriteFn[Checkpoint]:
        """`checkpoint` as a write function, for a caller that runs it in its own transaction.

        Raises:
            BadInput: as `checkpoint` (before any write).
        """
        check_name(name)

        def write(q: Queries) -> Checkpoint:
            q.lock_run(run.run_id)
            existing = checkpoints_of(q.checkpoint_events(run.run_id))
            data = new_checkpoint_data(name, existing, q.step_count(run.run_id) - 1, run.run_id)
            (event,) = q.append(run.run_id, [NewEvent(EventType.CHECKPOINT, None, _who(run), data)])
            return checkpoints_of([event])[0]

        return write

    def stopped(self, run: RunRecord, tool: str) -> bool:
        """Whether a new call of `tool` in `run` would be refused now by the kill file or a halt: a read,
        for what need not be done for a call that will not run (its capture). The call's own write
        checks again, and is the truth."""
        if self.kill_reason() is not None:
            return True
        with self.store.read() as q:
            return matching_halt(q.active_halts(), tool, run.scope) is not None

    def _halted(self, q: Queries, run: RunRecord, tool: str) -> Refused | None:
        halt = matching_halt(q.active_halts(lock_run=run.run_id), tool, run.scope)
        return Halted(halt_message(halt.reason, halt), halt_id=halt.halt_id) if halt else None


def _trace_of(extra: JSONObjectView) -> dict[str, JSONView]:
    return {key: value for key, value in extra.items() if key in ("trace_id", "span_id")}


def _call_id(call_id: str | None) -> dict[str, str]:
    """The framework's id of a call as journaled (`is_call_id`)."""
    if call_id is None:
        return {}
    if not is_call_id(call_id):
        raise BadInput("call_id must be 1-200 printable characters")
    return {"call_id": call_id}


def _who(run: RunRecord) -> str:
    return run.scope.actor or run.principal


def _checked_depends_on(depends_on: Sequence[int]) -> tuple[int, ...]:
    if isinstance(depends_on, (str, bytes)) or not all(
        isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in depends_on
    ):
        raise BadInput("depends_on must be a list of step numbers (integers from 0)")
    return tuple(sorted(set(depends_on)))


def _outcome_event(run: RunRecord, step: int, status: StepStatus, result: object, error: str | None) -> NewEvent:
    data: JSONObject
    if status is StepStatus.SUCCEEDED and isinstance(result, TextAnswer):
        data = {"result": to_json(result.value), "text": valid_text(result.text)}
    elif status is StepStatus.SUCCEEDED:
        data = {"result": to_json(result)}
    elif status in (StepStatus.FAILED, StepStatus.UNCERTAIN):
        data = {"error": "" if error is None else valid_text(str(error))}
    else:
        raise BadInput(f"an outcome is succeeded, failed or uncertain, not {status.value}")
    return NewEvent(EventType(status.value), step, _who(run), data)


def _journal_outcome(q: Queries, run_id: str, step: int, event: NewEvent, *, reported: bool = False) -> list[Event]:
    """Append the outcome; returns the step's events with it."""
    events = q.step_events(run_id, step, lock_run=True)
    if not events:
        raise NotFound(f"no step {step} in {run_id}")
    if reported and "upstream" in events[0].data:
        # Only the gateway saw what the upstream did: an agent's word first would hide the change.
        raise Forbidden(f"step {step} of {run_id} was called through the gateway, which journals its outcome itself")
    current = derive_status(events)
    if current is not StepStatus.INTENDED:  # an uncertain step is settled by `resolve`, with a note
        raise Conflict(f"step {step} of {run_id} already has an outcome ({current.value})")
    return [*events, *q.append(run_id, [event])]


def _unmanifested(run: RunRecord, tool: str, entry: ToolEntry | None) -> Refused | None:
    if entry is None and run.mode is Mode.ENFORCE:
        return NoManifestEntry(f"no manifest entry for {tool}")
    return None


def _dup_key(run: RunRecord, tool: str, args: JSONView, entry: ToolEntry | None) -> str | None:
    if entry is None or entry.idempotency_key is None:
        return None
    ctx = call_context(run, args)
    try:
        values = [resolve(template, ctx) for template in entry.idempotency_key]
    except MissingReference:
        return None  # the call does not carry the key's parts: nothing to compare it with
    return digest(run.scope.tenant, tool, values)


def _duplicate(q: Queries, dup_key: str) -> Refused | None:
    q.lock_name(dup_key)
    for record in q.steps_with_dup_key(dup_key):
        status = derive_status(q.step_events(record.run_id, record.step))
        if status.stands or status.unresolved:
            return Duplicate(f"duplicate call: step {record.step} of {record.run_id} already did this")
    return None


def _forward_approval(q: Queries, run: RunRecord, tool: str, args: JSONView) -> tuple[Refused | None, str | None]:
    """Refuse until a person approves this exact call; an approval is used up by the call it lets through."""
    call_key = digest(tool, args)
    open_requests = [a for a in q.approvals_for_call(run.run_id, ApprovalKind.CALL, call_key) if not a.used]
    if open_requests:
        latest = open_requests[-1]
        if latest.status is ApprovalStatus.APPROVED:
            return None, latest.approval_id
        if latest.status is ApprovalStatus.DENIED:
            return ApprovalDenied(f"approval denied: {latest.note or 'no note'}"), None
        return ApprovalRequired(f"approval required: {latest.approval_id}", latest.approval_id), None
    approval_id = new_approval_id()
    q.insert_approval(
        ApprovalRow(approval_id, run.run_id, None, ApprovalKind.CALL, tool, args, call_key, _who(run), utc_now())
    )
    q.append(
        run.run_id,
        [
            NewEvent(
                EventType.APPROVAL_REQUESTED,
                None,
                _who(run),
                {"approval_id": approval_id, "kind": "call", "tool": tool, "args": args},
            )
        ],
    )
    return ApprovalRequired(f"approval required: {approval_id}", approval_id), None


def _refused_event(run: RunRecord, tool: str, args: JSONView, refusal: Refused,
                   trace: JSONObjectView | None = None) -> NewEvent:
    """`refused`, with the caller's trace (as `intended` has it) so a refusal is found from its span too."""
    data: JSONObjectView = {"tool": tool, "args": args, "reason": refusal.message, "code": refusal.code,
            **(tracing.journal_fields() if trace is None else trace)}
    return NewEvent(EventType.REFUSED, None, _who(run), data)
