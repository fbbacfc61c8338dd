"""Drills and coverage: the evidence that a tool's declared undo works, and which write tools have
such evidence. Pure: the drill itself runs in `reversi.gateway.drill`.

A drill calls one write tool on a scratch server, rolls the call back through the engine, and reads
the world (the server's read tools) before the call and after the undo. Its verdict:

* `restored`: the undo was done and the world reads back as before;
* `residue`: the undo was done, the world differs, and the entry declares residue (what differs is
  listed for a person to hold against those sentences);
* `differs`: the undo was done, the world differs, and the entry declares no residue;
* `untested`: the world reads back as before, but the call had changed nothing the reads can see, so
  the undo was not put to the test;
* `undo_failed`: the rollback did not undo the call (it failed, or could not be planned).
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from fnmatch import fnmatchcase

from reversi.core.json_values import JSON, JSONObject, JSONView, LooseJSON, compact
from reversi.core.manifest import Compensation, Effect, ManifestSet, ToolEntry
from reversi.core.tool_listing import ListedTool, Listing

__all__ = ["CoverageRow", "Drill", "Verdict", "coverage_rows", "declared_undo", "differences", "new_drill_id",
           "only_reads", "undo_ran", "verdict_of"]

_MAX_DIFFERENCES = 20
_INDEX = re.compile(r"\[(\d+|\*)\]")


class Verdict(StrEnum):
    RESTORED = "restored"
    RESIDUE = "residue"
    DIFFERS = "differs"
    UNTESTED = "untested"
    UNDO_FAILED = "undo_failed"

    @property
    def passed(self) -> bool:
        return self in (Verdict.RESTORED, Verdict.RESIDUE)


@dataclass(frozen=True)
class Drill:
    """One drill's record. `evidence` holds the rest: the arguments, the forward and undo results,
    the read-back, the world before and after, the differences, the manifest entry."""

    drill_id: str
    tool: str
    server: str
    version: str
    verdict: Verdict
    at: str
    evidence: Mapping[str, LooseJSON] = field(default_factory=dict)

    def to_dict(self) -> JSONObject:
        return {"drill_id": self.drill_id, "tool": self.tool, "server": {"name": self.server, "version": self.version},
                "verdict": self.verdict.value, "at": self.at, **self.evidence}


def new_drill_id() -> str:
    return "drill_" + secrets.token_hex(8)


def differences(before: JSONView, after: JSONView, at: str = "", volatile: Sequence[str] = ()) -> list[str]:
    """Where two JSON values differ, as `PATH: BEFORE -> AFTER` lines (at most 20, then a count), but for
    paths that match a `volatile` glob (`*.updated_at`, where `*` matches anything, dots included)."""
    globs = [_INDEX.sub(r"[[]\1[]]", glob) for glob in volatile]  # `[3]`, `[*]`: a list index, not a set
    found = [line for path, line in _differences(before, after, at) if not any(fnmatchcase(path, g) for g in globs)]
    if len(found) > _MAX_DIFFERENCES:
        return [*found[:_MAX_DIFFERENCES], f"... and {len(found) - _MAX_DIFFERENCES} more"]
    return found


def _differences(before: JSONView, after: JSONView, at: str) -> Iterable[tuple[str, str]]:
    """(path, line) for each difference."""
    if isinstance(before, Mapping) and isinstance(after, Mapping):
        for key in [*before, *(k for k in after if k not in before)]:
            here = f"{at}.{key}" if at else str(key)
            if key not in after:
                yield here, f"{here}: {_short(before[key])} -> (gone)"
            elif key not in before:
                yield here, f"{here}: (absent) -> {_short(after[key])}"
            else:
                yield from _differences(before[key], after[key], here)
    elif isinstance(before, list) and isinstance(after, list) and len(before) == len(after):
        for index, (old, new) in enumerate(zip(before, after, strict=True)):
            yield from _differences(old, new, f"{at}[{index}]")
    elif compact(before) != compact(after):
        yield at, f"{at or 'the value'}: {_short(before)} -> {_short(after)}"


def _short(value: JSONView) -> str:
    text = compact(value)
    return text if len(text) <= 200 else text[:197] + "..."


def verdict_of(undone: bool, differs: bool, residue: Sequence[str], *, tested: bool = True) -> Verdict:
    """`undone`: the rollback undid the call (or skipped it: a dry run); `differs`: the world after the
    undo is not the world before; `tested`: the call changed the world and an undo ran."""
    if not undone:
        return Verdict.UNDO_FAILED
    if differs:
        return Verdict.RESIDUE if residue else Verdict.DIFFERS
    return Verdict.RESTORED if tested else Verdict.UNTESTED


def declared_undo(entry: ToolEntry | None, alternative: Compensation | None = None) -> str:
    """What an entry says of undoing its tool (or, given, one of its alternatives), in a few words."""
    if alternative is not None:
        return _call_words(alternative)
    if entry is None:
        return "no entry"
    if not entry.needs_undo:
        return "nothing to undo (effect: read)" if entry.effect is Effect.READ else "nothing to undo (idempotent)"
    if entry.irreversible:
        return "irreversible"
    if not entry.compensations:
        return "none declared"
    return "; ".join(
        (f"{name}: " if (name := entry.alternative_name(comp)) else "") + _call_words(comp)
        for comp in entry.compensations
    )


def _call_words(comp: Compensation) -> str:
    return ", then ".join(call.tool for call in comp.calls) + f" ({comp.kind.value})"


@dataclass(frozen=True)
class CoverageRow:
    """One write tool (or one of its entry's alternatives): its declared undo, its last drill, the residue
    declared."""

    tool: str
    undo: str
    drill: Drill | None
    residue: tuple[str, ...]
    entry_changed: bool = False  # since the drill: it tried another undo than the one declared now
    alternative: str | None = None  # the row is for this alternative of the tool's entry

    def to_dict(self) -> JSONObject:
        drilled: JSON = None if self.drill is None else {"drill_id": self.drill.drill_id, "at": self.drill.at,
                                                    "verdict": self.drill.verdict.value,
                                                    "undo_ran": undo_ran(self.drill),
                                                    "entry_changed_since": self.entry_changed}
        out: JSONObject = {"tool": self.tool, "undo": self.undo, "drilled": drilled, "residue": list(self.residue)}
        return out | ({"alternative": self.alternative} if self.alternative is not None else {})

    def to_text(self) -> str:
        drilled = "not drilled" if self.drill is None else f"drilled {self.drill.at}: {self.drill.verdict.value}"
        if self.drill is not None and not undo_ran(self.drill):
            drilled += " (a call that needed no undo)"
        if self.entry_changed:
            drilled += " (the entry changed since)"
        residue = f"; residue: {'; '.join(self.residue)}" if self.residue else ""
        which = f" [{self.alternative}]" if self.alternative is not None else ""
        return f"{self.tool}{which}  undo: {self.undo}  {drilled}{residue}"


def only_reads(tool: ListedTool, manifests: ManifestSet) -> bool:
    """Whether a tool changes nothing: the server marks it read-only, or its manifest entry says
    `effect: read` (the user's word, where the server says nothing)."""
    entry = manifests.lookup(tool.name)
    return not tool.writes or (entry is not None and entry.effect is Effect.READ)


def coverage_rows(manifests: ManifestSet, listing: Listing, drills: Sequence[Drill]) -> list[CoverageRow]:
    """A row for each tool the server may write with, in its order (one for each alternative of an entry
    that has several, with that alternative's drills only), with the drill that says most of its undo:
    among the drills (`drills` newest first) of the listing's server and version (any, where the listing
    or the drill does not say), one of the entry in force now before one of another entry, one
    that put its undo to the test before one that did not, one whose undo ran before one of a call that
    needed none (a dry run), and then the newest."""
    mine: dict[str, list[Drill]] = {}
    for done in drills:
        if (not listing.server or done.server == listing.server) and (
                not listing.version or not done.version or done.version == listing.version):
            mine.setdefault(done.tool, []).append(done)
    rows = []
    for tool in listing.tools:
        if only_reads(tool, manifests):
            continue
        entry = manifests.lookup(tool.name)
        digest = entry.digest if entry is not None else None
        several = entry.compensations if entry is not None and len(entry.compensations) > 1 else ()
        for comp in several or (None,):
            name = entry.alternative_name(comp) if entry is not None and comp is not None else None
            drills_of = [d for d in mine.get(tool.name, []) if name is None or d.evidence.get("alternative") == name]
            ranked = sorted(drills_of, key=lambda d: (_drilled_entry(d) == digest, d.verdict is not Verdict.UNTESTED,
                                                      undo_ran(d)), reverse=True)  # stable: the newest first
            drill = ranked[0] if ranked else None
            changed = drill is not None and _drilled_entry(drill) != digest
            residue = comp.residue if comp is not None else entry.residue if entry is not None else ()
            rows.append(CoverageRow(tool.name, declared_undo(entry, comp), drill, residue, changed, name))
    return rows


def _drilled_entry(drill: Drill) -> str | None:
    then = drill.evidence.get("entry")
    digest = then.get("digest") if isinstance(then, Mapping) else None
    return digest if isinstance(digest, str) else None


def undo_ran(drill: Drill) -> bool:
    """Whether the drill's rollback ran an undo (a dry run's needs none: it only shows the world unchanged)."""
    undo = drill.evidence.get("undo")
    events = undo.get("events") if isinstance(undo, Mapping) else None
    return isinstance(events, list) and any(isinstance(e, Mapping) and e.get("type") == "compensating"
                                            for e in events)
