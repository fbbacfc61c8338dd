"""Which halt, if any, stops a call. Pure: no I/O."""

from __future__ import annotations

from collections.abc import Iterable
from fnmatch import fnmatchcase

from reversi.core.models import Halt, Scope


def halt_message(reason: str, halt: Halt | None = None) -> str:
    """What a refused call is told: `kill switch: REASON` (the kill file's, with no `halt`), then which
    halt refused it and what that halt stops, so that no one told "kill switch" (a model least of all)
    takes a halt of some calls for a stop of all of them."""
    said = f"kill switch: {reason or 'kill file present'}"
    if halt is None:
        return said
    scope = halt.scope.to_dict()
    stops = "only calls with " + ", ".join(f"{k}={v}" for k, v in scope.items()) if scope else "every new call"
    return f"{said} (halt {halt.halt_id} stops {stops})"


def _matches(glob: str | None, value: str) -> bool:
    """A scope field left out matches everything; one named matches shell-style, case-sensitive."""
    return glob is None or fnmatchcase(value, glob)


def matching_halt(halts: Iterable[Halt], tool: str, scope: Scope) -> Halt | None:
    """The first halt whose every named scope field matches the call."""
    for halt in halts:
        s = halt.scope
        pairs = ((s.tool, tool), (s.actor, scope.actor), (s.tenant, scope.tenant), (s.environment, scope.environment))
        if all(_matches(glob, value) for glob, value in pairs):
            return halt
    return None


def can_stop_tenant(halt: Halt, tenant: str) -> bool:
    """Whether `halt` can stop some call of a run of `tenant`."""
    return _matches(halt.scope.tenant, tenant)
