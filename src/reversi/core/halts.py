"""Which halt, if any, stops a call. Pure: no I/O."""

from __future__ import annotations

from collections.abc import Iterable
from fnmatch import fnmatchcase

from reversi.core.models import Halt, Scope


def halt_message(reason: str) -> str:
    return f"kill switch: {reason or 'kill file present'}"


def matching_halt(halts: Iterable[Halt], tool: str, scope: Scope) -> Halt | None:
    """The first halt whose every named scope field matches the call (shell-style, case-sensitive)."""
    for halt in halts:
        s = halt.scope
        pairs = ((s.tool, tool), (s.actor, scope.actor), (s.tenant, scope.tenant), (s.environment, scope.environment))
        if all(glob is None or fnmatchcase(value, glob) for glob, value in pairs):
            return halt
    return None
