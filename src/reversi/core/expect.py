"""Matching a read-back answer against a manifest's `verification.expect`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reversi.core.json_values import quoted

__all__ = ["first_mismatch"]


def first_mismatch(expect: Any, answer: Any) -> str | None:
    """The first way `answer` fails to match `expect`, or None when it matches.

    Every key `expect` names must be in the answer with an equal value, recursively through nested
    mappings; extra keys in the answer are fine. Lists and scalars compare by equality, where
    `1 == 1.0` but `true != 1`. Mismatches are looked for in `expect`'s key order.

    Returns:
        None on a match, else e.g. `` `status` is "succeeded", expected "canceled" ``.
    """
    return _mismatch(expect, answer, "")


def _mismatch(expect: Any, answer: Any, path: str) -> str | None:
    if not isinstance(expect, Mapping):
        if _same(expect, answer):
            return None
        return f"{_subject(path)} is {quoted(answer)}, expected {quoted(expect)}"
    if not isinstance(answer, Mapping):
        return f"{_subject(path)} is {quoted(answer)}, expected an object"
    for key, expected in expect.items():
        where = f"{path}.{key}" if path else str(key)
        if key not in answer:
            return f"`{where}` is missing, expected {quoted(expected)}"
        found = _mismatch(expected, answer[key], where)
        if found is not None:
            return found
    return None


def _subject(path: str) -> str:
    return f"`{path}`" if path else "the answer"


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return a.keys() == b.keys() and all(_same(a[key], b[key]) for key in a)
    return bool(a == b)

