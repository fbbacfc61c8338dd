"""The records of the ledger and the state derived from them. Pure: no I/O."""

from __future__ import annotations

import re
import secrets
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from types import MappingProxyType
from typing import Any, Generic, TypeVar

from reversi.core.json_values import JSONObject, JSONObjectView, LooseJSON, LooseJSONObject
from reversi.core.times import format_time, parse_time
from reversi.errors import BadInput

_T = TypeVar("_T")
RUN_ID_RE = re.compile(r"run_[A-Za-z0-9_-]{1,64}")
_BASE32 = "abcdefghijklmnopqrstuvwxyz234567"


_HEX = "[0-9a-f]"
# Each kind of id, as this package makes them: anything else names nothing, whatever the store holds.
ID_FORMS = {
    "run": (RUN_ID_RE, "run_ followed by 1-64 of A-Z a-z 0-9 _ -"),
    "approval": (re.compile(f"apr_{_HEX}{{32}}"), "apr_ followed by 32 hex digits"),
    "halt": (re.compile(f"halt_{_HEX}{{8}}(-{_HEX}{{4}}){{3}}-{_HEX}{{12}}"), "halt_ followed by a UUID"),
    "key": (re.compile("[a-z0-9]{12}"), "12 of a-z 0-9"),
}


def check_id(kind: str, value: object) -> str:
    """Return `value` if it has the form of a `kind` id (run, approval, halt, key).

    Raises:
        BadInput: it does not (`malformed approval id 'apr_!': expected apr_ followed by 32 hex digits`).
    """
    pattern, form = ID_FORMS[kind]
    if not isinstance(value, str) or not pattern.fullmatch(value):
        shown = value if not isinstance(value, str) or len(value) <= 80 else value[:77] + "..."
        raise BadInput(f"malformed {kind} id {shown!r}: expected {form}")
    return value


def is_call_id(call_id: object) -> bool:
    """Whether a framework's id of a call (a model's tool call id) can be journaled: 1-200 printable
    characters. It comes from a model, so it is checked like a name before it is kept."""
    return isinstance(call_id, str) and 0 < len(call_id) <= 200 and call_id.isprintable()


def check_run_id(run_id: object) -> str:
    """Return `run_id` if it is a valid run id, else raise BadInput naming it."""
    return check_id("run", run_id)


def new_run_id() -> str:
    """An unguessable run id: `run_` and 26 random base32 characters (130 bits)."""
    return "run_" + "".join(secrets.choice(_BASE32) for _ in range(26))


def utc_now() -> str:
    """The current time as UTC RFC 3339 with microseconds."""
    return format_time(datetime.now(UTC))


def in_seconds(seconds: float) -> str:
    """The time `seconds` from now, as `utc_now` writes it."""
    return format_time(datetime.now(UTC) + timedelta(seconds=seconds))


class Mode(StrEnum):
    OBSERVE = "observe"
    ENFORCE = "enforce"


class EventType(StrEnum):
    RUN_OPENED = "run_opened"
    RUN_CONTINUED = "run_continued"
    INTENDED = "intended"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    UNCERTAIN = "uncertain"
    RESOLVED = "resolved"
    REFUSED = "refused"
    APPROVAL_REQUESTED = "approval_requested"
    APPROVAL_GRANTED = "approval_granted"
    APPROVAL_DENIED = "approval_denied"
    COMPENSATING = "compensating"
    COMPENSATED = "compensated"
    COMPENSATION_FAILED = "compensation_failed"
    VERIFIED = "verified"
    VERIFICATION_FAILED = "verification_failed"
    UNVERIFIED = "unverified"
    HALT_ADDED = "halt_added"
    HALT_LIFTED = "halt_lifted"
    CHECKPOINT = "checkpoint"
    VALUES_ERASED = "values_erased"
    FOLLOW_UP_OPENED = "follow_up_opened"
    FOLLOW_UP_CLOSED = "follow_up_closed"
    FOLLOW_UP_HANDED = "follow_up_handed"


class StepStatus(StrEnum):
    INTENDED = "intended"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    UNCERTAIN = "uncertain"
    COMPENSATING = "compensating"
    COMPENSATED = "compensated"
    COMPENSATION_FAILED = "compensation_failed"

    @property
    def stands(self) -> bool:
        """The step's effect is (still) in the world."""
        return self in _STANDING

    @property
    def unresolved(self) -> bool:
        """The effect is unknown until an operator settles it."""
        return self in (StepStatus.INTENDED, StepStatus.UNCERTAIN)


_STANDING = frozenset({StepStatus.SUCCEEDED, StepStatus.COMPENSATING, StepStatus.COMPENSATION_FAILED})

# The status each event type leaves a step in; events not listed leave the status as it was.
_STATUS_AFTER: dict[str, StepStatus] = {
    EventType.INTENDED: StepStatus.INTENDED,
    EventType.SUCCEEDED: StepStatus.SUCCEEDED,
    EventType.FAILED: StepStatus.FAILED,
    EventType.UNCERTAIN: StepStatus.UNCERTAIN,
    EventType.COMPENSATING: StepStatus.COMPENSATING,
    EventType.COMPENSATED: StepStatus.COMPENSATED,
    EventType.COMPENSATION_FAILED: StepStatus.COMPENSATION_FAILED,
}


@dataclass(frozen=True)
class NewEvent:
    """An event about to be appended; the store gives it its `seq` and time."""

    type: EventType
    step: int | None = None
    actor: str = ""
    data: JSONObjectView = field(default_factory=dict)


@dataclass(frozen=True)
class Event:
    """One entry of the append-only ledger (`run_id` is None for the halts' own stream)."""

    run_id: str | None
    seq: int
    step: int | None
    type: str
    at: str
    actor: str
    data: Mapping[str, LooseJSON]  # read back from the journal: the shape its writer gave it

    def to_dict(self) -> LooseJSONObject:
        return {
            "run_id": self.run_id,
            "seq": self.seq,
            "step": self.step,
            "type": self.type,
            "at": self.at,
            "actor": self.actor,
            "data": dict(self.data),
        }


@dataclass(frozen=True)
class Scope:
    actor: str = ""
    tenant: str = ""
    environment: str = ""


@dataclass(frozen=True)
class RunRecord:
    """What a run was opened with; fixed for its lifetime."""

    run_id: str
    principal: str
    mode: Mode
    scope: Scope
    labels: Mapping[str, str]
    created_at: str


@dataclass(frozen=True)
class StepRecord:
    """The immutable facts of a step, fixed when it was journaled `intended`."""

    run_id: str
    step: int
    tool: str
    args: LooseJSON
    depends_on: tuple[int, ...] = ()
    compensation_needs_approval: bool = False
    manifest_digest: str | None = None
    dup_key: str | None = None


@dataclass(frozen=True)
class Claim:
    """A remote worker's hold on a compensation, until `until` (RFC 3339)."""

    worker: str
    until: str

    def is_live(self, now: datetime | None = None) -> bool:
        """Whether the claim has not expired yet."""
        return parse_time(self.until) > (now or datetime.now(UTC))


@dataclass(frozen=True)
class StepState:
    """A step with its status and outcome, derived from its events."""

    record: StepRecord
    status: StepStatus
    result: LooseJSON = None
    has_result: bool = False
    error: str | None = None
    settled_by: str | None = None
    claim: Claim | None = None
    last_error: str | None = None
    attempts: int = 0
    denied_approval: str | None = None  # the compensation approval that was asked for and denied, if so
    before: LooseJSON = None  # what the manifest's capture read before the call (`$before`), when has_before
    has_before: bool = False
    before_absent: str | None = None  # the capture found nothing: the error that said so
    at: str = ""  # when the step was journaled `intended`: its place in journal order across runs
    call_id: str | None = None  # the framework's id of the call (a model's tool call id), when it gave one
    result_text: str | None = None  # the result's text as it came, when it was read as JSON
    before_text: str | None = None  # the capture's text as it came, likewise
    declared_undo: LooseJSON = None  # the undo its server declared, when that was its entry (`core.server_undo`)
    follow_up_open: bool = False  # a rollback opened a follow-up for it, and nobody closed it yet

    @property
    def index(self) -> int:
        return self.record.step

    @property
    def tool(self) -> str:
        return self.record.tool

    @property
    def args(self) -> LooseJSON:
        return self.record.args

    def to_dict(self) -> JSONObject:
        return {
            "step": self.index,
            "tool": self.tool,
            "args": self.args,
            "depends_on": list(self.record.depends_on),
            "status": self.status.value,
            "result": self.result,
            "error": self.error,
        }


class _Bulk(Generic[_T]):
    """A constructor of the frozen dataclass `cls`, every field given positionally, for the many made at
    once by a snapshot. It fills a copy of a blank instance's attribute dict (sharing its keys, as the
    instances `__init__` makes do) rather than setting each field through `object.__setattr__`, three
    times slower; what it makes is `==` to `cls(*values)`, attribute for attribute."""

    def __init__(self, cls: type[_T]) -> None:
        self._cls = cls
        self._names = tuple(f.name for f in fields(cls))  # type: ignore[arg-type]
        self._blank: dict[str, Any] | None = None

    def __call__(self, *values: Any) -> _T:
        blank = self._blank
        if blank is None:  # the first one is made as usual; its dict, emptied, is the blank
            made = self._cls(*values)
            blank = made.__dict__.copy()
            for name in blank:
                blank[name] = None
            self._blank = blank
            return made
        attributes = blank.copy()
        attributes.update(zip(self._names, values, strict=True))
        made = object.__new__(self._cls)
        object.__setattr__(made, "__dict__", attributes)
        return made


def derive_status(events: Iterable[Event]) -> StepStatus:
    """A step's status alone, from its events in seq order (the fold of `derive_step`, cut short)."""
    status = StepStatus.INTENDED
    for ev in events:
        status = StepStatus(ev.data["status"]) if ev.type == EventType.RESOLVED else _STATUS_AFTER.get(ev.type, status)
    return status


def settled_by_hand(events: Iterable[Event]) -> bool:
    """Whether a step's status was last set by a person's `resolved` (no outcome or undo came after it):
    such a settlement may be corrected by resolving the step again."""
    last = None
    for ev in events:
        if ev.type == EventType.RESOLVED or ev.type in _STATUS_AFTER:
            last = ev.type
    return last == EventType.RESOLVED


def parts_done(events: Iterable[Event]) -> int:
    """Of a step's undo made of several calls, how many are known done: a call's `compensating` is
    journaled only after the one before it answered, so the highest `part` journaled (0 for none)."""
    return max((int(ev.data["part"]) for ev in events
                if ev.type == EventType.COMPENSATING and isinstance(ev.data.get("part"), int)), default=0)


def derive_step(record: StepRecord, events: Iterable[Event]) -> StepState:
    """Fold a step's events (in seq order) into its current state."""
    return derive_step_rows(record, [(ev.type, ev.at, ev.actor, ev.data) for ev in events])


# The event types whose data `derive_step` reads (of any other event it reads the type alone); of an
# `intended` event's data it reads `before`, `before_absent`, `before_text`, `call_id`, `declared_undo`.
_DATA_READ = frozenset({EventType.INTENDED, EventType.APPROVAL_REQUESTED, EventType.APPROVAL_GRANTED,
                        EventType.APPROVAL_DENIED, EventType.RESOLVED, EventType.SUCCEEDED, EventType.FAILED,
                        EventType.UNCERTAIN, EventType.COMPENSATING, EventType.COMPENSATION_FAILED})
NO_DATA: Mapping[str, LooseJSON] = MappingProxyType({})  # an event's data where `data_read` says none of it is read


def data_read(event_type: str, text: str) -> bool:
    """Whether `derive_step` reads anything of an event's data, given the data's stored JSON text. A
    store that folds many steps (`derive_step_rows`) may pass `NO_DATA` for the others instead of
    decoding them. A key shows in JSON text in quotes, as it is (JSON escapes no ASCII letter or `_`),
    so an `intended` text naming none of the keys read has none of them at any depth."""
    if event_type == _INTENDED:  # (the keys spelled out: this runs for every event of a snapshot)
        return '"before' in text or '"call_id"' in text or '"declared_undo"' in text
    return event_type in _DATA_READ


def derive_step_rows(record: StepRecord,
                     events: Iterable[tuple[str, str, str, Mapping[str, LooseJSON]]]) -> StepState:
    """`derive_step` over the step's events as (type, at, actor, data) tuples, in seq order."""
    status = StepStatus.INTENDED
    result: LooseJSON = None
    has_result = False
    error: str | None = None
    settled_by: str | None = None
    claim: Claim | None = None
    last_error: str | None = None
    attempts = 0
    asked: str | None = None  # the step's latest compensation approval request
    denied: str | None = None
    before: LooseJSON = None
    has_before = False
    before_absent: str | None = None
    at = ""
    call_id: str | None = None
    result_text: str | None = None
    before_text: str | None = None
    declared_undo: LooseJSON = None
    follow_up_open = False  # a rollback opened a follow-up for it that nobody closed since
    status_after, follow_ups = _STATUS_AFTER, _FOLLOW_UP_OPEN_AFTER
    for kind, when, actor, data in events:
        if kind == _INTENDED:
            has_before, before, before_absent = "before" in data, data.get("before"), data.get("before_absent")
            at, call_id, before_text = when, data.get("call_id"), data.get("before_text")
            declared_undo = data.get("declared_undo")
        if kind == _APPROVAL_REQUESTED and data.get("kind") == "compensation":
            asked, denied = data.get("approval_id"), None
            continue
        if kind in _APPROVAL_DECIDED and data.get("approval_id") == asked:
            denied = asked if kind == _APPROVAL_DENIED else None
            continue
        if kind == _RESOLVED:
            status = StepStatus(data["status"])
            settled_by = actor
            has_result = "result" in data
            result = data.get("result")
            error = data.get("error") if status is StepStatus.FAILED else None
            result_text = None  # what a person settled: no text came with it
            continue
        new_status = status_after.get(kind)
        if new_status is None:
            follow_up_open = follow_ups.get(kind, follow_up_open)
            continue
        status = new_status
        if kind == _SUCCEEDED:
            has_result, result, error, result_text = True, data.get("result"), None, data.get("text")
        elif kind in _FAILED_OR_UNCERTAIN:
            error = data.get("error")
        elif kind == _COMPENSATING:
            attempts = max(attempts, int(data.get("attempt", 1)))
            claim = Claim(data["worker"], data["claim_until"]) if "claim_until" in data else None
        elif kind == _COMPENSATION_FAILED:
            last_error, claim = data.get("error"), None
        elif kind == _COMPENSATED:
            claim = None
    return _step_state(record, status, result, has_result, error, settled_by, claim, last_error, attempts, denied,
                       before, has_before, before_absent, at, call_id, result_text, before_text, declared_undo,
                       follow_up_open)


# Plain strings, compared with the `type` a store reads (faster than comparing with the enum's members).
_INTENDED, _SUCCEEDED, _RESOLVED = EventType.INTENDED.value, EventType.SUCCEEDED.value, EventType.RESOLVED.value
_FAILED_OR_UNCERTAIN = (EventType.FAILED.value, EventType.UNCERTAIN.value)
_APPROVAL_REQUESTED, _APPROVAL_DENIED = EventType.APPROVAL_REQUESTED.value, EventType.APPROVAL_DENIED.value
_APPROVAL_DECIDED = (EventType.APPROVAL_GRANTED.value, _APPROVAL_DENIED)
_COMPENSATING, _COMPENSATED, _COMPENSATION_FAILED = (
    EventType.COMPENSATING.value, EventType.COMPENSATED.value, EventType.COMPENSATION_FAILED.value)
_step_state = _Bulk(StepState)
step_record = _Bulk(StepRecord)  # StepRecord(...) for a store reading many steps
# Whether a step has an open follow-up after each event that opens or closes one.
_FOLLOW_UP_OPEN_AFTER = {EventType.FOLLOW_UP_OPENED.value: True, EventType.FOLLOW_UP_CLOSED.value: False}


@dataclass(frozen=True)
class RunSnapshot:
    """A run and all its steps at one moment: the planner's whole input."""

    run: RunRecord
    steps: tuple[StepState, ...]

    def step(self, index: int) -> StepState:
        return self.steps[index]

    def to_dict(self) -> LooseJSONObject:
        """The run as `reversi show --json` prints it and the HTTP API answers: its summary, its labels,
        and `steps` the list of its steps (the count moves to `steps_count`)."""
        summary = RunSummary.of(self.run, (s.status for s in self.steps))
        return summary.to_dict() | {
            "labels": dict(self.run.labels),
            "steps": [s.to_dict() for s in self.steps],
            "steps_count": summary.steps,
        }


class ApprovalKind(StrEnum):
    CALL = "call"
    COMPENSATION = "compensation"


class ApprovalStatus(StrEnum):
    PENDING = "pending"
    APPROVED = "approved"
    DENIED = "denied"


@dataclass(frozen=True)
class Approval:
    """A request for a person's decision, with its status derived from the run's events."""

    approval_id: str
    run_id: str
    step: int | None
    kind: ApprovalKind
    tool: str
    args: LooseJSON
    status: ApprovalStatus
    requested_by: str
    requested_at: str
    decided_by: str | None = None
    decided_at: str | None = None
    note: str | None = None
    used: bool = False
    decided_principal: str | None = None  # who decided, as authenticated; `decided_by` is who they said

    def to_dict(self) -> JSONObject:
        return {
            "approval_id": self.approval_id,
            "run_id": self.run_id,
            "step": self.step,
            "kind": self.kind.value,
            "tool": self.tool,
            "args": self.args,
            "status": self.status.value,
            "requested_by": self.requested_by,
            "requested_at": self.requested_at,
            "decided_by": self.decided_by,
            "decided_at": self.decided_at,
            "note": self.note,
            "used": self.used,
            "decided_principal": self.decided_principal,
        }


def who_acted(said: str, principal: str | None) -> str:
    """Who did an operator action, as text: the name they gave (`actor`, `by`), and the principal they
    were authenticated as when that differs (`dana (principal ops-bot)`)."""
    return said if principal is None or principal == said else f"{said} (principal {principal})"


@dataclass(frozen=True)
class HaltScope:
    tool: str | None = None
    actor: str | None = None
    tenant: str | None = None
    environment: str | None = None

    def to_dict(self) -> dict[str, str]:
        return {
            k: v
            for k, v in (
                ("tool", self.tool),
                ("actor", self.actor),
                ("tenant", self.tenant),
                ("environment", self.environment),
            )
            if v is not None
        }


@dataclass(frozen=True)
class Halt:
    halt_id: str
    reason: str
    scope: HaltScope
    by: str
    created_at: str
    # Who added it, as authenticated (None: added before it was journaled). Not in `to_dict`, whose keys
    # SPEC §8 fixes: the journal's `halt_added` has it, and text output shows it beside `by` when they differ.
    principal: str | None = None

    def to_dict(self) -> JSONObject:
        return {
            "halt_id": self.halt_id,
            "reason": self.reason,
            "scope": dict(self.scope.to_dict()),  # a dict[str, JSON], as a dict's values are invariant
            "by": self.by,
            "created_at": self.created_at,
        }


@dataclass(frozen=True)
class RunSummary:
    """One line of `reversi runs`: a run with counts of its steps."""

    run: RunRecord
    steps: int
    standing: int
    unresolved: int
    statuses: frozenset[str] = frozenset()

    @classmethod
    def of(cls, run: RunRecord, statuses: Iterable[StepStatus]) -> RunSummary:
        """The summary of a run whose steps have these statuses."""
        found = list(statuses)
        return cls(run, len(found), sum(s.stands for s in found), sum(s.unresolved for s in found),
                   frozenset(s.value for s in found))

    def to_dict(self) -> LooseJSONObject:
        return {
            "run_id": self.run.run_id,
            "principal": self.run.principal,
            "mode": self.run.mode.value,
            "actor": self.run.scope.actor,
            "tenant": self.run.scope.tenant,
            "environment": self.run.scope.environment,
            "created_at": self.run.created_at,
            "steps": self.steps,
            "standing": self.standing,
            "unresolved": self.unresolved,
        }
