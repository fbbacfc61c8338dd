"""Tool manifests: their entries, merging several files, looking a tool up. No file I/O here.

Parsing one file's YAML is `reversi.core.manifest_yaml.parse_manifest`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from fnmatch import fnmatchcase

from reversi.core.json_values import JSONObjectView, JSONView, quoted
from reversi.core.sensitive import SensitivePath
from reversi.core.windows import UndoWindow

__all__ = [
    "ApprovalRule",
    "Call",
    "Capture",
    "Compensation",
    "CompensationKind",
    "Conditions",
    "Effect",
    "FollowUp",
    "ManifestSet",
    "Probe",
    "Problem",
    "ToolEntry",
    "Verification",
    "merge",
]


class Effect(StrEnum):
    """What a tool does to the world."""

    READ = "read"
    WRITE = "write"


class CompensationKind(StrEnum):
    """How an undo relates to the call: restores exact state, or makes amends."""

    INVERSE = "inverse"
    COMPENSATION = "compensation"


@dataclass(frozen=True)
class Capture:
    """The read made before each call, whose answer `$before` names: call `tool` with `args` (a
    template of `$args` and `$run` references).

    Attributes:
        absent_on_error: An error answer whose text contains this means there was nothing to read (a
            missing file): the call goes ahead and `$before` names nothing. Any other failure refuses
            the call.
    """

    tool: str
    args: JSONObjectView = field(default_factory=dict)
    absent_on_error: str | None = None


Conditions = JSONObjectView
"""A reference → the value it must match (`{"$args.dryRun": true}`), matched by `reversi.core.expect`."""

ApprovalRule = bool | Conditions
"""`requires_approval`: always, never, or when the call's arguments meet conditions (`$args` and `$run` only,
so the rule is decided when the call is made)."""


@dataclass(frozen=True)
class Call:
    """One more call of an undo made of several (`Compensation.then`): `tool` with `args`, a template."""

    tool: str
    args: JSONObjectView = field(default_factory=dict)


@dataclass(frozen=True)
class Compensation:
    """One way to undo a step; `args` is a template of references.

    Attributes:
        when: Conditions under which this undo fits the step. Of an entry's alternatives, the first
            whose `when` holds is the undo; a step none fits plans as unrecoverable, naming why. None:
            always.
        name: What the alternative is called in the plan (`overwrite`); None: its place in the list.
        then: Calls made after `tool`, in order, as parts of the same undo (write a note back, then
            move it where it was): each part is journaled, and a re-run starts at the first part not
            known done.
    """

    tool: str
    args: JSONObjectView = field(default_factory=dict)
    kind: CompensationKind = CompensationKind.COMPENSATION
    requires_approval: ApprovalRule = False
    residue: tuple[str, ...] = ()
    when: Conditions | None = None
    name: str | None = None
    then: tuple[Call, ...] = ()
    verification: Verification | None = None  # this alternative's read-back, instead of the entry's

    @property
    def calls(self) -> tuple[Call, ...]:
        """Every call the undo makes, in order: its `tool` with its `args`, then those of `then`."""
        return (Call(self.tool, self.args), *self.then)


@dataclass(frozen=True)
class FollowUp:
    """What a person must do about a call that stays in the world after a rollback (it cannot be undone,
    its undo failed, was denied or came too late): `title` and `text`, templates of the call's
    references; `owner`, who does it (a role, a team, an actor); `action`, a call that would make amends,
    for the person to make once they agree."""

    title: JSONView
    text: JSONView = ""
    owner: str = ""
    action: Call | None = None


@dataclass(frozen=True)
class Probe:
    """The read that tells whether a call whose outcome is unknown (`intended`, `uncertain`) took effect.

    Attributes:
        tool, args: The read: a tool, and a template of `$args`, `$run` and `$step`.
        took_effect: An `expect` the answer matches when the call took effect.
        not_taken: An `expect` the answer matches when it did not.
        result: The step's result when it took effect: a template in which `$result` names the answer.
    """

    tool: str
    args: JSONObjectView = field(default_factory=dict)
    took_effect: JSONObjectView | None = None
    not_taken: JSONObjectView | None = None
    result: JSONView = "$result"


@dataclass(frozen=True)
class Verification:
    """The read-back after an undo: call `tool` with `args`, require the answer to match `expect`."""

    tool: str
    args: JSONObjectView = field(default_factory=dict)
    expect: JSONObjectView = field(default_factory=dict)
    retries: int = 0
    backoff_ms: int = 200


@dataclass(frozen=True)
class ToolEntry:
    """One tool's manifest entry, with where it was written.

    Attributes:
        pattern: The key as written: an exact tool name or a glob.
        irreversible_reason: What `irreversible: "..."` says stays in the world ("" for `true`).
        compensations: The ways to undo a call, tried in order (`Compensation.when`); empty: none declared.
        capture: The read made before each call (`$before`), if any.
        read_when: Conditions (a reference → the value it must match) under which a call of this write
            tool changed nothing, e.g. `{"$args.dryRun": True}`; such a step plans `skip` (`read`).
        sensitive: Paths of its arguments and result that hold secrets: masked wherever shown.
        resources: Templates naming what a call touches or makes (`file:${args.path}`), which give
            steps lineage across runs (`reversi.core.resources`).
        digest: Lowercase hex SHA-256 of the entry's canonical JSON as written; any edit changes it.
        volatile: Globs over the paths a drill reports differences at (`*.updated_at`): what changes on
            its own, timestamps and generated ids, which a drill does not count as not restored.
        declaration: For an entry an upstream server declared rather than a manifest (see
            `reversi.core.server_undo`): what each of its steps journals of it. None for a manifest's.
        undo_window: When an undo of a call stops being possible (`undo_until`, `undo_window`,
            `undo_from`); None: never.
        probe: The read that settles a call whose outcome is unknown (`reversi.core.probes`), if any.
        follow_up: What a person must do when a call stays after a rollback (`reversi.core.follow_ups`).
    """

    pattern: str
    source: str
    line: int
    effect: Effect = Effect.WRITE
    idempotent: bool = False
    irreversible: bool = False
    requires: tuple[str, ...] = ()
    requires_approval: ApprovalRule = False
    idempotency_key: tuple[JSONView, ...] | None = None
    compensations: tuple[Compensation, ...] = ()
    verification: Verification | None = None
    irreversible_reason: str = ""
    capture: Capture | None = None
    read_when: Conditions | None = None
    sensitive: tuple[SensitivePath, ...] = ()
    resources: tuple[JSONView, ...] = ()  # texts, or `$each` forms that make lists of them
    digest: str = ""
    volatile: tuple[str, ...] = ()
    declaration: JSONObjectView | None = None
    undo_window: UndoWindow | None = None
    probe: Probe | None = None
    follow_up: FollowUp | None = None

    @property
    def residue(self) -> tuple[str, ...]:
        """What the entry's undos say they cannot take back: each alternative's sentences, once each."""
        return tuple(dict.fromkeys(line for comp in self.compensations for line in comp.residue))

    def alternative_name(self, comp: Compensation) -> str | None:
        """How the plan names one of the entry's undos: its `name`, else its place (`#2`); None when the
        entry has only one."""
        if len(self.compensations) == 1:
            return None
        return comp.name or f"#{self.compensations.index(comp) + 1}"

    @property
    def needs_undo(self) -> bool:
        """True for a write that is not idempotent: rolling back has to undo it."""
        return self.effect is Effect.WRITE and not self.idempotent


@dataclass(frozen=True)
class Problem:
    """One problem found in a manifest; warnings do not make it invalid."""

    source: str
    line: int
    message: str
    warning: bool = False

    def __str__(self) -> str:
        where = f"{self.source}:{self.line}" if self.line else self.source
        return f"{where}: {'warning: ' if self.warning else ''}{self.message}"


class ManifestSet:
    """Merged manifests; lookup by tool name."""

    def __init__(self, entries: Sequence[ToolEntry] = ()) -> None:
        self.entries = tuple(entries)
        self._exact: dict[str, ToolEntry] = {}
        globs: list[tuple[int, ToolEntry]] = []
        for index, entry in enumerate(self.entries):
            if any(char in entry.pattern for char in "*?["):
                globs.append((index, entry))
            else:
                self._exact.setdefault(entry.pattern, entry)
        globs.sort(key=lambda item: (-len(item[1].pattern), item[0]))
        self._globs = tuple(entry for _, entry in globs)
        self._cache: dict[str, ToolEntry | None] = {}
        self._declared: Mapping[str, ToolEntry] = {}
        self.declares_resources = any(entry.resources for entry in self.entries)
        """Whether some entry names resources: else recording indexes none, at no cost."""

    @classmethod
    def empty(cls) -> ManifestSet:
        """A set with no entries: every lookup is None."""
        return cls(())

    def declare(self, entries: Mapping[str, ToolEntry]) -> None:
        """Use the entries upstream servers declared (`reversi.core.server_undo`), by tool name, below
        every manifest's: replaces those declared before."""
        self._declared = dict(entries)

    def lookup(self, tool: str) -> ToolEntry | None:
        """The entry for `tool` now: a manifest's (`written`), else the one its server declared."""
        return self.written(tool) or self._declared.get(tool)

    def written(self, tool: str) -> ToolEntry | None:
        """A manifest's entry for `tool`: its exact name, else the longest matching glob (first in file order)."""
        try:
            return self._cache[tool]
        except KeyError:
            pass
        entry = self._exact.get(tool)
        if entry is None:
            entry = next((glob for glob in self._globs if fnmatchcase(tool, glob.pattern)), None)
        self._cache[tool] = entry
        return entry

    def touches(self, tool: str) -> bool:
        """Whether `tool`'s entry names resources its calls may touch."""
        entry = self.lookup(tool)
        return entry is not None and bool(entry.resources) and entry.effect is not Effect.READ

    def __repr__(self) -> str:
        return f"ManifestSet({[entry.pattern for entry in self.entries]!r})"


def merge(parsed: Sequence[Sequence[ToolEntry]]) -> tuple[ManifestSet, list[Problem]]:
    """Merge the entries of several files (in the order given) into one set.

    Returns:
        The set, and a problem for each tool key already defined in an earlier file (the first
        definition is kept).
    """
    seen: dict[str, ToolEntry] = {}
    problems: list[Problem] = []
    for entries in parsed:
        for entry in entries:
            first = seen.setdefault(entry.pattern, entry)
            if first is not entry:
                message = f"{quoted(entry.pattern)} is already defined in {first.source}:{first.line}"
                problems.append(Problem(entry.source, entry.line, message))
    return ManifestSet(tuple(seen.values())), problems

