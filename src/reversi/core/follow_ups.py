"""Follow-ups: what a person still has to do about a step a rollback leaves in the world. Pure: no I/O.

A step stays when it cannot be undone (irreversible, unrecoverable, its window closed), its undo
failed after every attempt, or its undo's approval was denied. When its manifest entry declares a
`follow_up`, the rollback opens one (`follow_up_opened`, once per step whatever the re-runs and
crashes: its id is the run's and the step's), and a person closes it with a note
(`follow_up_closed`). A run is *settled* when every step that stays has a closed follow-up (the
rollback being incomplete all the same). Once the rollback's `follow_up` hook (an issue tracker) took
one, it is journaled `follow_up_handed`; one it did not take is handed again by the next rollback.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from reversi.core.json_values import JSONObject, JSONView, LooseJSON, compact
from reversi.core.manifest import FollowUp
from reversi.core.models import Event, EventType
from reversi.core.references import ReferenceContext, resolve
from reversi.errors import MissingReference

__all__ = ["FollowUpState", "follow_up_id", "follow_ups_of", "opened_data"]


def follow_up_id(run_id: str, step: int) -> str:
    """The follow-up of one step: the same on every re-run of the rollback."""
    return "fu_" + hashlib.sha256(f"{run_id}:{step}".encode()).hexdigest()[:24]


def opened_data(follow_up: FollowUp, ctx: ReferenceContext, run_id: str, step: int, why: str) -> JSONObject:
    """What `follow_up_opened` journals: the entry's follow-up, its references resolved (a text whose
    references name nothing is kept as written, naming what is missing), and why the step stays."""
    data: JSONObject = {"follow_up_id": follow_up_id(run_id, step), "title": _text(follow_up.title, ctx),
                            "text": _text(follow_up.text, ctx), "owner": follow_up.owner, "why": why}
    if follow_up.action is not None:
        try:
            args = resolve(dict(follow_up.action.args), ctx)
        except MissingReference as missing:
            args = {"unavailable": f"{missing.ref} names nothing"}
        data["action"] = {"tool": follow_up.action.tool, "args": args}
    return data


def _text(template: JSONView, ctx: ReferenceContext) -> str:
    try:
        value = resolve(template, ctx)
    except MissingReference as missing:
        return f"{template if isinstance(template, str) else compact(template)} ({missing.ref} names nothing)"
    return value if isinstance(value, str) else compact(value)


@dataclass(frozen=True)
class FollowUpState:
    """One follow-up, from its events."""

    follow_up_id: str
    run_id: str
    step: int
    title: str
    text: str
    owner: str
    why: str
    action: Mapping[str, LooseJSON] | None  # as `follow_up_opened` journaled it
    opened_at: str
    opened_by: str
    closed_at: str | None = None
    closed_by: str | None = None
    note: str | None = None
    handed: bool = False  # the follow-up hook took it

    @property
    def status(self) -> str:
        return "open" if self.closed_at is None else "closed"

    def hook_payload(self) -> JSONObject:
        """What the `follow_up` hook is told of it: the run, the step and what `follow_up_opened` journaled."""
        out: JSONObject = {"run_id": self.run_id, "step": self.step, "follow_up_id": self.follow_up_id,
                           "title": self.title, "text": self.text, "owner": self.owner, "why": self.why}
        return out | ({"action": dict(self.action)} if self.action is not None else {})

    def to_dict(self) -> JSONObject:
        out: JSONObject = {
            "follow_up_id": self.follow_up_id, "run_id": self.run_id, "step": self.step, "status": self.status,
            "title": self.title, "text": self.text, "owner": self.owner, "why": self.why,
            "opened_at": self.opened_at, "opened_by": self.opened_by,
        }
        if self.action is not None:
            out["action"] = dict(self.action)
        if self.closed_at is not None:
            out.update(closed_at=self.closed_at, closed_by=self.closed_by, note=self.note)
        return out

    def describe(self) -> str:
        owner = f" ({self.owner})" if self.owner else ""
        return f"{self.follow_up_id}  step {self.step}  {self.status}{owner}  {self.title}"


def follow_ups_of(run_id: str, events: Iterable[Event]) -> list[FollowUpState]:
    """A run's follow-ups, in the order they were opened, each as its events leave it."""
    found: dict[str, FollowUpState] = {}
    for ev in events:
        data = ev.data
        key = data.get("follow_up_id")
        if ev.type == EventType.FOLLOW_UP_OPENED and isinstance(key, str) and key not in found and ev.step is not None:
            action = data.get("action")
            found[key] = FollowUpState(key, run_id, ev.step, str(data.get("title", "")), str(data.get("text", "")),
                                       str(data.get("owner", "")), str(data.get("why", "")),
                                       action if isinstance(action, Mapping) else None, ev.at, ev.actor)
        elif ev.type == EventType.FOLLOW_UP_CLOSED and isinstance(key, str) and key in found:
            opened = found[key]
            found[key] = replace(opened, closed_at=ev.at, closed_by=ev.actor, note=str(data.get("note", "")))
        elif ev.type == EventType.FOLLOW_UP_HANDED and isinstance(key, str) and key in found:
            found[key] = replace(found[key], handed=True)
    return list(found.values())
