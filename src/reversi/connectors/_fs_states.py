"""How the fs tools compare what is at a path with what a step left there, and say how it differs."""

from __future__ import annotations

from reversi.connectors._fs_root import State

__all__ = ["describe", "difference", "same"]


def same(a: State, b: State) -> bool:
    """Whether two states are the same: existence, type, bytes (by digest) and mode."""
    return all(a.get(key) == b.get(key) for key in ("exists", "type", "sha256", "mode"))


def difference(relative: str, now: State, left: State) -> str:
    """How what is at `relative` now differs from what the step left there, in one line."""
    if not now["exists"]:
        return f"{relative} no longer exists"
    if not left["exists"]:
        return f"{relative} exists again ({describe(now)})"
    if now["type"] != left["type"]:
        return f"{relative} is now a {now['type']}"
    if now["sha256"] != left["sha256"]:
        return f"{relative} now has sha256 {now['sha256']}, the step left {left['sha256']}"
    return f"{relative} now has mode {now['mode']}, the step left {left['mode']}"


def describe(state: State) -> str:
    """A state in a few words: a file's digest, or what else is there."""
    return f"sha256 {state['sha256']}" if state["type"] == "file" else f"a {state['type']}"
