"""Which steps must stay while a later one stands: `depends_on` and the manifest's `requires`.

S depends on T when T is in S's `depends_on`, or S's tool `requires` a glob that matches T's tool
and T came earlier. A rollback walks the run newest first, so by the time it reaches T it knows
which of T's dependents will still stand when it ends; `Blockers` answers that in time linear in
the run (plus the matches themselves).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from fnmatch import fnmatchcase


class Blockers:
    """Tracks the steps that will still stand after the rollback, as the walk goes newest first."""

    def __init__(self, depends_on: Sequence[Sequence[int]], requires: Sequence[Sequence[str]]) -> None:
        """`depends_on[s]` and `requires[s]` are step s's explicit dependencies and required globs."""
        self._dependents: dict[int, list[int]] = defaultdict(list)
        for step, targets in enumerate(depends_on):
            for target in targets:
                self._dependents[target].append(step)
        self._requires = requires
        self._standing: set[int] = set()
        self._standing_by_glob: dict[str, list[int]] = defaultdict(list)
        self._matches: dict[tuple[str, str], bool] = {}

    def stands(self, step: int) -> None:
        """Record that `step` will still stand when the rollback ends."""
        self._standing.add(step)
        for glob in self._requires[step]:
            self._standing_by_glob[glob].append(step)

    def blocked_by(self, step: int, tool: str) -> tuple[int, ...]:
        """The dependents of `step` (whose tool is `tool`) recorded so far as still standing."""
        found = {s for s in self._dependents.get(step, ()) if s in self._standing}
        for glob, steps in self._standing_by_glob.items():
            key = (tool, glob)
            match = self._matches.get(key)
            if match is None:
                match = self._matches[key] = fnmatchcase(tool, glob)
            if match:
                found.update(s for s in steps if s > step)
        return tuple(sorted(found))


def dependencies_of(
    tools: Sequence[str], depends_on: Sequence[Sequence[int]], requires: Sequence[Sequence[str]]
) -> dict[int, dict[int, str]]:
    """For each step with any, the earlier steps it depends on and why: `declared` (its `depends_on`) or
    `requires GLOB` (the first of its tool's globs that matches the earlier step's tool)."""
    found: dict[int, dict[int, str]] = {}
    matches: dict[tuple[str, str], bool] = {}
    for step, tool_globs in enumerate(requires):
        why = {target: "declared" for target in depends_on[step]}
        for glob in tool_globs:
            for earlier in range(step):
                if earlier not in why:
                    key = (tools[earlier], glob)
                    match = matches.get(key)
                    if match is None:
                        match = matches[key] = fnmatchcase(*key)
                    if match:
                        why[earlier] = f"requires {glob}"
        if why:
            found[step] = dict(sorted(why.items()))
    return found
