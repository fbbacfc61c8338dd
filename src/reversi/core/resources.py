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
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from reversi.core.expect import unmet_condition
from reversi.core.manifest import Effect, ToolEntry
from reversi.core.references import MissingReference, ReferenceContext, resolve

__all__ = ["MAX_RESOURCE", "Dependent", "Lineage", "RunLineage", "Touch", "resource_key", "resources_of"]

MAX_RESOURCE = 1000
"""A resource's text is cut to this many characters before it is hashed or shown."""


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

    def to_dict(self) -> dict[str, Any]:
        return {"run": self.run_id, "step": self.step, "resource": self.resource}

    def describe(self) -> str:
        return f"{self.run_id} step {self.step} changed {self.resource} after this step"


@dataclass(frozen=True)
class RunLineage:
    """What a walk of one run needs of the lineage: for each step, the earlier steps of the run it
    depends on by resource (`same_run`), and the steps of other runs that depend on it and will still
    stand when the rollback ends (`standing`)."""

    same_run: Sequence[tuple[int, ...]] = ()
    standing: Mapping[int, tuple[Dependent, ...]] = field(default_factory=dict)


@dataclass
class Lineage:
    """Who depends on whom through resources, for the steps of some runs.

    Build it from every touch of the resources those runs touched (`touches`, any run of the tenant)
    and, for each planned run, its steps' resource texts by key (`names`, to say which resource).
    """

    touches: Iterable[Touch]
    names: Mapping[str, Mapping[int, Mapping[str, str]]] = field(default_factory=dict)
    _later: dict[tuple[str, int], list[tuple[Touch, Touch]]] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        by_key: dict[str, list[Touch]] = defaultdict(list)
        for touch in self.touches:
            by_key[touch.key].append(touch)
        self._later = defaultdict(list)
        for touches in by_key.values():
            touches.sort()
            for i, earlier in enumerate(touches):
                for later in touches[i + 1:]:
                    if (later.run_id, later.step) != (earlier.run_id, earlier.step):
                        self._later[(earlier.run_id, earlier.step)].append((earlier, later))

    def same_run(self, run_id: str, steps: int) -> list[tuple[int, ...]]:
        """For each of a run's `steps` steps, the earlier steps of the run it depends on by resource."""
        depends: list[set[int]] = [set() for _ in range(steps)]
        for step in range(steps):
            for _, later in self._later.get((run_id, step), ()):
                if later.run_id == run_id and 0 <= later.step < steps:
                    depends[later.step].add(step)
        return [tuple(sorted(d)) for d in depends]

    def other_runs(self, run_id: str, step: int) -> list[Dependent]:
        """The steps of other runs that touched one of this step's resources after it, oldest first,
        each once (named by the first such resource)."""
        seen: dict[tuple[str, int], Dependent] = {}
        step_names = self.names.get(run_id, {}).get(step, {})
        for earlier, later in self._later.get((run_id, step), ()):
            if later.run_id != run_id and (later.run_id, later.step) not in seen:
                name = step_names.get(earlier.key, "a resource it shares")
                seen[(later.run_id, later.step)] = Dependent(later.run_id, later.step, name)
        return list(seen.values())

    def for_run(self, run_id: str, steps: int, stands: Callable[[str, int], bool]) -> RunLineage:
        """The lineage one walk of a run of `steps` steps needs; `stands(run, step)` says whether a step
        of another run will still stand when the rollback ends."""
        standing = {}
        for step in range(steps):
            found = tuple(d for d in self.other_runs(run_id, step) if stands(d.run_id, d.step))
            if found:
                standing[step] = found
        return RunLineage(self.same_run(run_id, steps), standing)
