"""Checkpoints: named points in a run's journal, and the rollback scope one sets. Pure: no I/O.

A checkpoint is a run-level `checkpoint` event whose data is `{name, after_step}`: the run's last
step number when it was taken (-1 before any step). A rollback scoped to it (or to a step number
given as is) plans and undoes only the steps numbered after that; the earlier ones are kept and not
listed. Idempotency keys stay per run and step, so scopes never make a step undone twice.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase

from reversi.core.json_values import JSONObject, LooseJSON
from reversi.core.models import Event, EventType, StepState
from reversi.core.printable import ESCAPED
from reversi.errors import BadInput, Conflict, NotFound

MAX_NAME = 200


@dataclass(frozen=True)
class Checkpoint:
    """A named point of a run: everything up to `after_step` was recorded before it, at `at`."""

    name: str
    after_step: int
    at: str

    def to_dict(self) -> JSONObject:
        return {"name": self.name, "after_step": self.after_step, "at": self.at}


@dataclass(frozen=True)
class RollbackScope:
    """The part of a run a plan or rollback covers: the steps numbered above `after_step`;
    `checkpoint` is the name it was given by, when it was. A scope of many runs (`reversi.core.scopes`)
    may narrow it further to the steps of tools matching the glob `tool`, and to those journaled from
    `since` to `until` (ledger times); the steps it leaves out are kept, and hold back what they
    depend on while they stand."""

    after_step: int
    checkpoint: str | None = None
    tool: str | None = None
    since: str | None = None
    until: str | None = None

    @property
    def filtered(self) -> bool:
        """Whether it leaves out steps other than those up to `after_step`."""
        return self.tool is not None or self.since is not None or self.until is not None

    def covers(self, step: StepState) -> bool:
        """Whether the scope covers `step` (whose number is above `after_step`)."""
        return ((self.tool is None or fnmatchcase(step.tool, self.tool))
                and (self.since is None or step.at >= self.since)
                and (self.until is None or step.at <= self.until))

    def describe(self) -> str:
        """The scope as a line of text output."""
        parts = []
        if self.after_step >= 0 or self.checkpoint is not None:
            after = f"step {self.after_step}"
            if self.checkpoint is not None:
                after = f"checkpoint {self.checkpoint!r} ({after})"
            if not self.filtered:
                return f"scope: the steps after {after}; earlier steps are kept"
            parts.append(f"the steps after {after}")
        if self.tool is not None:
            parts.append(f"the steps of tools matching {self.tool!r}")
        if self.since is not None:
            parts.append(f"the steps journaled from {self.since}")
        if self.until is not None:
            parts.append(f"the steps journaled until {self.until}")
        return f"scope: {'; '.join(parts) or 'every step'}; other steps are kept"

    def to_dict(self) -> JSONObject:
        out: JSONObject = {"after_step": self.after_step, "checkpoint": self.checkpoint}
        return out | {k: v for k, v in (("tool", self.tool), ("since", self.since), ("until", self.until)) if v}

    @classmethod
    def from_dict(cls, data: LooseJSON) -> RollbackScope | None:
        """The scope `to_dict` made (as a job keeps it); None for None."""
        if data is None:
            return None
        return cls(int(data["after_step"]), data.get("checkpoint"), data.get("tool"), data.get("since"),
                   data.get("until"))


def check_name(name: object) -> str:
    """`name` if it can name a checkpoint: a string of 1-200 printable characters, not only spaces.

    Raises:
        BadInput: it cannot, saying why (the name is not repeated: it may be hostile).
    """
    if not isinstance(name, str):
        raise BadInput(f"a checkpoint name must be a string, not {type(name).__name__}")
    if not 1 <= len(name) <= MAX_NAME:
        raise BadInput(f"a checkpoint name must be 1-{MAX_NAME} characters, not {len(name)}")
    bad = next((c for c in name if c in ESCAPED or not c.isprintable()), None)
    if bad is not None:
        raise BadInput(f"a checkpoint name must be printable: it holds U+{ord(bad):04X}")
    if not name.strip():
        raise BadInput("a checkpoint name must not be only spaces")
    return name


def checkpoints_of(events: Iterable[Event]) -> list[Checkpoint]:
    """The checkpoints among a run's events, in journal order."""
    return [
        Checkpoint(e.data["name"], int(e.data["after_step"]), e.at) for e in events if e.type == EventType.CHECKPOINT
    ]


def new_checkpoint_data(name: object, existing: Sequence[Checkpoint], last_step: int, run_id: str) -> JSONObject:
    """The data of a new `checkpoint` event: `name` checked and unique within the run.

    Raises:
        BadInput: as `check_name`.
        Conflict: the run has a checkpoint of that name already.
    """
    name = check_name(name)
    if any(c.name == name for c in existing):
        raise Conflict(f"{run_id} already has a checkpoint named {name!r}")
    return {"name": name, "after_step": last_step}


def rollback_scope(
    checkpoints: Sequence[Checkpoint], steps: int, run_id: str, *, to: object = None, after_step: object = None
) -> RollbackScope | None:
    """The scope that `to` (a checkpoint's name) or `after_step` (a step number, -1 for none) sets
    in a run of `steps` steps; None when neither is given (the whole run).

    Raises:
        BadInput: both are given, or one is not of its form.
        NotFound: no checkpoint of that name, or no such step.
    """
    if to is not None and after_step is not None:
        raise BadInput("give a checkpoint (to) or a step number (after_step), not both")
    if to is not None:
        name = check_name(to)
        found = next((c for c in checkpoints if c.name == name), None)
        if found is None:
            raise NotFound(f"no checkpoint named {name!r} in {run_id}")
        return RollbackScope(found.after_step, found.name)
    if after_step is None:
        return None
    if isinstance(after_step, bool) or not isinstance(after_step, int) or after_step < -1:
        raise BadInput(f"after_step must be a step number (an int from -1), not {_shown(after_step)}")
    if after_step >= steps:
        raise NotFound(f"no step {after_step} in {run_id}")
    return RollbackScope(after_step)


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
