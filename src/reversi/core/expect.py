"""Matching a read-back answer against a manifest's `verification.expect`, and a call against conditions
(`read_when`, `compensation.when`). Pure: no I/O.

Operators may stand where a value is expected: `{$exists: false}` (the key, or the reference, names
nothing) or `{$exists: true}` (it names something, whatever it is); `{$excludes: "TEXT"}` (a text that
does not contain TEXT: a read that replaced what it could not decode with U+FFFD is not the file);
`{$contains: "TEXT"}` (a text that contains TEXT); `{$matches: "RE"}` (a text in which the regular
expression RE, run on RE2, finds a match: anchor it with `^...$` for the whole text);
`{$not: V}` (what V does not match: `{$not: true}` holds for false and for nothing at all);
`{$any: [V, ...]}` (what one of them matches); `{$gt: N}`, `{$gte: N}`, `{$lt: N}`, `{$lte: N}` (a
number, not a boolean, compared with N); and, for a whole read-back only, `{$error: true}` or
`{$error: "TEXT"}` (the read tool answered with an error, containing TEXT).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from reversi.core.json_values import JSONObjectView, JSONView, LooseJSON, quoted
from reversi.core.patterns import first_match
from reversi.core.references import NOTHING, ReferenceContext, resolve
from reversi.errors import MissingReference

__all__ = [
    "ANY", "COMPARISONS", "CONTAINS", "ERROR", "EXCLUDES", "EXISTS", "MATCHES", "NOT", "TEXT_MATCHERS",
    "first_mismatch", "rule_holds", "unmet_condition",
]

EXISTS, EXCLUDES, ERROR, NOT, ANY = "$exists", "$excludes", "$error", "$not", "$any"
CONTAINS, MATCHES = "$contains", "$matches"
TEXT_MATCHERS = (EXCLUDES, CONTAINS, MATCHES)
COMPARISONS: dict[str, tuple[str, Callable[[float, float], bool]]] = {
    "$gt": (">", lambda a, b: a > b), "$gte": (">=", lambda a, b: a >= b),
    "$lt": ("<", lambda a, b: a < b), "$lte": ("<=", lambda a, b: a <= b),
}


def first_mismatch(expect: LooseJSON, answer: LooseJSON, error: str | None = None) -> str | None:
    """The first way `answer` fails to match `expect`, or None when it matches.

    Every key `expect` names must be in the answer with an equal value, recursively through nested
    mappings; extra keys in the answer are fine. Lists and scalars compare by equality, where
    `1 == 1.0` but `true != 1`. Mismatches are looked for in `expect`'s key order.

    Args:
        expect: What the answer must show.
        answer: The read tool's answer (ignored when `error` is given).
        error: The read tool's error text when it answered with an error, which only `{$error: ...}` expects.

    Returns:
        None on a match, else e.g. `` `status` is "succeeded", expected "canceled" ``.
    """
    if isinstance(expect, Mapping) and len(expect) == 1 and isinstance(expect.get(ANY), list):
        # a whole expect of alternatives, each may be an `$error` one: a read that answers one way or another
        found = [first_mismatch(choice, answer, error) for choice in expect[ANY]]
        return None if None in found else "; ".join(f"or {m}" if i else m for i, m in enumerate(found) if m)
    wanted = expect.get(ERROR) if isinstance(expect, Mapping) else None
    if wanted is not None:
        if error is None:
            return f"the answer is {quoted(answer)}, expected an error"
        if isinstance(wanted, str) and wanted not in error:
            return f"the error is {quoted(error)}, expected one containing {quoted(wanted)}"
        return None
    if error is not None:
        return f"the read answered an error: {error}"
    return _mismatch(expect, answer, "")


def unmet_condition(conditions: JSONObjectView, ctx: ReferenceContext) -> str | None:
    """The first of `conditions` (a reference → the value it must match) that does not hold for a call,
    or None when all hold. A reference that names nothing holds only `{$exists: false}`."""
    for written, expected in conditions.items():
        try:
            value = resolve(written, ctx)
        except MissingReference:
            value = NOTHING
        try:
            wanted = resolve(expected, ctx)
        except MissingReference as missing:
            return f"{missing.ref} names nothing"
        found = _mismatch(wanted, value, written)
        if found is not None:
            return found
    return None


def rule_holds(rule: bool | JSONObjectView, ctx: ReferenceContext) -> bool:
    """A `requires_approval` rule for one call: true, false, or whether its conditions all hold."""
    return rule if isinstance(rule, bool) else unmet_condition(rule, ctx) is None


def _exists(expect: JSONView) -> bool | None:
    """What `{$exists: B}` asks for (B), or None when `expect` is not that operator."""
    if isinstance(expect, Mapping) and EXISTS in expect:
        return bool(expect[EXISTS])
    return None


def _logical(expect: Mapping[str, LooseJSON], answer: LooseJSON, path: str) -> str | None:
    """`$not`, `$any` and the comparisons: the mismatch, or None when it holds."""
    shown = "missing" if answer is NOTHING else _shown(answer)
    if NOT in expect:
        if _mismatch(expect[NOT], answer, path) is not None:
            return None
        return f"{_subject(path)} is {shown}, expected anything but {quoted(expect[NOT])}"
    if ANY in expect:
        if any(_mismatch(choice, answer, path) is None for choice in expect[ANY]):
            return None
        return f"{_subject(path)} is {shown}, expected one of {quoted(expect[ANY])}"
    name = next(iter(expect))
    sign, holds = COMPARISONS[name]
    number = isinstance(answer, int | float) and not isinstance(answer, bool)
    if number and holds(answer, expect[name]):
        return None
    return f"{_subject(path)} is {shown}, expected a number {sign} {quoted(expect[name])}"


def _is_logical(expect: JSONView) -> bool:
    return isinstance(expect, Mapping) and len(expect) == 1 and next(iter(expect)) in (NOT, ANY, *COMPARISONS)


def _text_matcher(expect: Mapping[str, LooseJSON], answer: LooseJSON, path: str) -> str | None:
    """`$excludes`, `$contains` and `$matches`: the mismatch, or None when the answer is a text that holds."""
    name = next(iter(expect))
    wanted = str(expect[name])
    if isinstance(answer, str):
        if name == EXCLUDES:
            return None if wanted not in answer else f"{_subject(path)} contains {quoted(wanted)}"
        try:
            if (wanted in answer) if name == CONTAINS else first_match(wanted, answer, 0) is not None:
                return None
        except ValueError:  # manifests are checked before this runs: a pattern RE2 refuses matches nothing
            pass
    shown = "missing" if answer is NOTHING else _shown(answer)
    what = {EXCLUDES: "without", CONTAINS: "containing", MATCHES: "matching"}[name]
    return f"{_subject(path)} is {shown}, expected a text {what} {quoted(wanted)}"


def _mismatch(expect: LooseJSON, answer: LooseJSON, path: str) -> str | None:
    if _is_logical(expect):
        return _logical(expect, answer, path)
    if isinstance(expect, Mapping) and len(expect) == 1 and next(iter(expect)) in TEXT_MATCHERS:
        return _text_matcher(expect, answer, path)
    exists = _exists(expect)
    if exists is not None:
        if exists == (answer is not NOTHING):
            return None
        return f"{_subject(path)} is missing, expected it present" if exists else (
            f"{_subject(path)} is {_shown(answer)}, expected it absent")
    if answer is NOTHING:
        return f"{_subject(path)} is missing, expected {quoted(expect)}"
    if not isinstance(expect, Mapping):
        if _same(expect, answer):
            return None
        return f"{_subject(path)} is {_shown(answer)}, expected {quoted(expect)}"
    if not isinstance(answer, Mapping):
        return f"{_subject(path)} is {_shown(answer)}, expected an object"
    for key, expected in expect.items():
        where = f"{path}.{key}" if path else str(key)
        found = _mismatch(expected, answer.get(key, NOTHING), where)
        if found is not None:
            return found
    return None


def _shown(answer: LooseJSON, limit: int = 200) -> str:
    """An answer as a message quotes it, cut short when long (the whole answer is journaled beside it)."""
    text = quoted(answer)
    return text if len(text) <= limit else f"{text[: limit - 3]}..."


def _subject(path: str) -> str:
    return f"`{path}`" if path else "the answer"


def _same(a: JSONView, b: JSONView) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return a.keys() == b.keys() and all(_same(a[key], b[key]) for key in a)
    return bool(a == b)
