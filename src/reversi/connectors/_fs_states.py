"""What the fs tools' undos share: trusting a step's result, and comparing what is at a path with what
the step left there, saying how it differs."""

from __future__ import annotations

from collections.abc import Collection

from reversi.connectors import _fs_root, _seal
from reversi.connectors._fs_root import State
from reversi.core.json_values import JSONView, LooseJSONObject
from reversi.errors import BadArgument

__all__ = ["describe", "difference", "same", "trusted"]


def trusted(result: JSONView, tools: Collection[str]) -> LooseJSONObject:
    """The result, once its seal proves this connector made it (with one of `tools`), in this root.

    Raises:
        UntrustedResult: no seal, a seal of another tool or key, or a result changed since.
        BadArgument: the step acted in another root than this connector's.
    """
    made = _seal.unseal(result, tools).result
    root = _fs_root.root_path()
    if made.get("root") != str(root):
        raise BadArgument("result", f"the step acted in {made.get('root')}; this connector's root is {root}")
    return made


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
