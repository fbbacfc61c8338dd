"""Resources: the things in the world a write touches or makes, and the lineage they give runs. Pure.

A manifest entry may name them (`resources: ["file:${args.path}", "charge:${result.id}"]`). Each
template resolves, for one call, to a text (or a list of texts: one resource each); one that names
nothing for this call (`$result` of a call with no result) names no resource. Only writes touch
resources: a read, or a write whose `read_when` holds, touches none.

The journal keeps each resource as a keyed hash (`resource_key`) bound to the tenant, never the text:
the text may hold what the journal encrypts, and a hash under the store's key says nothing to a
reader of the database. A step that touches a resource after another step did (later in journal
order: by the time its outcome was journaled, then run and step) **depends on it**, in any run of
the tenant: undoing the earlier step while the later stands would put back a world the later one
changed. `Lineage` holds, for the steps of the runs being planned, who depends on them.
"""

from __future__ import annotations

import hashlib
import hmac
from bisect import bisect_right
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from reversi.core.expect import unmet_condition
from reversi.core.json_values import JSONObject
from reversi.core.manifest import Effect, ToolEntry
from reversi.core.references import ReferenceContext, resolve
from reversi.errors import MissingReference

__all__ = ["MAX_RESOURCE", "SHOWN", "Dependent", "Lineage", "RunLineage", "StandingTouches", "Touch", "resource_key",
           "resources_of"]

MAX_RESOURCE = 1000
"""A resource's text is cut to this many characters before it is hashed or shown."""
SHOWN = 5
"""At most this many steps of other runs are named as holding one step back (one is enough to)."""


def resources_of(entry: ToolEntry | None, ctx: ReferenceContext) -> list[str]:
    """The resources one call touched, in the entry's order, each once; none for a read."""
    if entry is None or not entry.resources or entry.effect is Effect.READ:
        return []
    if entry.read_when and unmet_condition(entry.read_when, ctx) is None:
        return []
    found: dict[str, None] = {}
    for template in entry.resources:
        try:
            value = resolve(template, ctx)
        except MissingReference:
            continue
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, str | int | float) and not isinstance(item, bool) and str(item):
                found[str(item)[:MAX_RESOURCE]] = None
    return list(found)


def resource_key(secret: bytes, tenant: str, resource: str) -> str:
    """The journal's name for `resource` in `tenant`: an HMAC-SHA256 under the store's key, hex."""
    message = f"reversi-resource\x00{tenant}\x00{resource}".encode()
    return hmac.new(secret, message, hashlib.sha256).hexdigest()


@dataclass(frozen=True, order=True)
class Touch:
    """One step's touch of one resource, ordered as the journal has them (time, run, step)."""

    at: str
    run_id: str
    step: int
    key: str = field(compare=False)


@dataclass(frozen=True)
class Dependent:
    """A step of another run that touched a resource after the step it depends on."""

    run_id: str
    step: int
    resource: str  # the resource's text, as the earlier step names it

    def to_dict(self) -> JSONObject:
        return {"run": self.run_id, "step": self.step, "resource": self.resource}

    def describe(self) -> str:
        """One line of text (the resource's own newlines written as escapes: it may come from an agent)."""
        shown = self.resource.replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t")
        return f"{self.run_id} step {self.step} changed {shown} after this step"


@dataclass(frozen=True)
class RunLineage:
    """What a walk of one run needs of the lineage: for each step, the earlier steps of the run it
    depends on by resource (`same_run`), and the steps of other runs that depend on it and will still
    stand when the rollback ends (`standing`)."""

    same_run: Sequence[tuple[int, ...]] = ()
    standing: Mapping[int, tuple[Dependent, ...]] = field(default_factory=dict)


class Lineage:
    """Who depends on whom through resources, for the steps of some runs, in time linear in the touches.

    Built from every touch of the resources those runs touched (`touches`, any run of the tenant).
    `name_of(run, step)` gives a step's resource texts by key, to say which resource holds it back;
    it is asked only of the steps that are held back.
    """

    def __init__(self, touches: Iterable[Touch],
                 name_of: Callable[[str, int], Mapping[str, str]] | None = None) -> None:
        by_key: dict[str, list[Touch]] = defaultdict(list)
        for touch in touches:
            by_key[touch.key].append(touch)
        # A resource touched once makes no dependency: only those touched more than once are kept.
        self._by_key = {key: sorted(found) for key, found in by_key.items() if len(found) > 1}
        self._at: dict[tuple[str, int], list[tuple[str, int]]] = defaultdict(list)  # (run, step) → (key, index)
        self._keys_of: dict[str, set[str]] = defaultdict(set)  # run → the resources it touched
        self._runs_of: dict[str, set[str]] = {}  # resource → the runs that touched it
        self._next_in_run: dict[tuple[str, int], int] = {}  # (key, index) → the index of the run's next touch
        for key, found in self._by_key.items():
            last: dict[str, int] = {}
            for index in range(len(found) - 1, -1, -1):
                touch = found[index]
                self._at[(touch.run_id, touch.step)].append((key, index))
                self._keys_of[touch.run_id].add(key)
                if touch.run_id in last:
                    self._next_in_run[(key, index)] = last[touch.run_id]
                last[touch.run_id] = index
            self._runs_of[key] = set(last)
        self._name_of = name_of or (lambda run_id, step: {})
        self._names: dict[tuple[str, int], Mapping[str, str]] = {}

    def same_run(self, run_id: str, steps: int) -> list[tuple[int, ...]]:
        """For each of a run's `steps` steps, the step of the run that touched one of its resources
        just before it (the walk's dependencies chain the rest)."""
        depends: list[set[int]] = [set() for _ in range(steps)]
        for step in range(steps):
            for key, index in self._at.get((run_id, step), ()):
                after = self._next_in_run.get((key, index))
                later = self._by_key[key][after].step if after is not None else None
                if later is not None and later != step and 0 <= later < steps:
                    depends[later].add(step)
        return [tuple(sorted(d)) for d in depends]

    def runs_sharing(self, run_ids: Iterable[str]) -> set[str]:
        """The runs that touched a resource one of these runs touched (these among them)."""
        return {run for r in run_ids for key in self._keys_of.get(r, ()) for run in self._runs_of[key]}

    def later_elsewhere(self, run_ids: Iterable[str]) -> set[tuple[str, int]]:
        """The steps of runs other than `run_ids` that touched a resource after one of theirs did."""
        walked = set(run_ids)
        found: set[tuple[str, int]] = set()
        for (run, _), at in self._at.items():
            if run in walked:
                for key, index in at:
                    found.update((t.run_id, t.step) for t in self._by_key[key][index + 1:] if t.run_id not in walked)
        return found

    def standing(self, stands: Callable[[str, int], bool]) -> StandingTouches:
        """Which touches will still stand, by resource, for `stands(run, step)` (one pass over the touches)."""
        return StandingTouches({key: [i for i, t in enumerate(found) if stands(t.run_id, t.step)]
                                for key, found in self._by_key.items()})

    def for_run(self, run_id: str, steps: int, standing: StandingTouches) -> RunLineage:
        """The lineage one walk of a run of `steps` steps needs: for each step, the steps of other runs
        that touched one of its resources after it and will still stand (at most `SHOWN` named)."""
        held: dict[int, tuple[Dependent, ...]] = {}
        for step in range(steps):
            found: dict[tuple[str, int], Dependent] = {}
            for key, index in self._at.get((run_id, step), ()):
                positions = standing.by_key.get(key, ())
                for position in positions[bisect_right(positions, index):]:
                    later = self._by_key[key][position]
                    where = (later.run_id, later.step)
                    if later.run_id != run_id and where not in found:
                        found[where] = Dependent(*where, self._name(run_id, step, key))
                        if len(found) >= SHOWN:
                            break
                if len(found) >= SHOWN:
                    break
            if found:
                held[step] = tuple(found.values())
        return RunLineage(self.same_run(run_id, steps), held)

    def _name(self, run_id: str, step: int, key: str) -> str:
        names = self._names.get((run_id, step))
        if names is None:
            names = self._names[(run_id, step)] = self._name_of(run_id, step)
        return names.get(key, "a resource it shares")


@dataclass(frozen=True)
class StandingTouches:
    """For each resource, the positions (in journal order) of the touches that will still stand."""

    by_key: Mapping[str, list[int]]
