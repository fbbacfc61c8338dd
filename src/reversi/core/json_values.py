"""Turning what callers hand us into plain JSON values, and digests of them. Pure: no I/O."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeAlias

from reversi.errors import BadInput

# Which alias a JSON value takes (none of them changes what the code does; they say what it holds):
#
# - `JSON`, `JSONObject`: a value this code builds, returns or stores, typed exactly. A `dict` or
#   `list` of them is invariant, so build it as a literal or annotate the variable (`out: JSONObject`).
# - `JSONView`, `JSONObjectView`: a parameter that only reads a JSON value. Read-only containers are
#   covariant, so callers may pass a `dict[str, str]`, a `list[int]` or a tuple as they are.
# - `LooseJSON`, `LooseJSONObject`: JSON whose shape its writer knows, not the type checker: a journal
#   entry or an event's data read back, a parsed body, an upstream's answer, a template resolved, a
#   `to_dict` its readers read into. What is read deep in it (`data["undone"]["by"]`) is checked where
#   it is read, or by a validation before, so these are `Any` under a name that says what the value is.
#   Use them only where the exact aliases would take a cast or an isinstance that checks nothing new.
JSON: TypeAlias = dict[str, "JSON"] | list["JSON"] | str | int | float | bool | None
JSONObject: TypeAlias = dict[str, JSON]
JSONView: TypeAlias = Mapping[str, "JSONView"] | Sequence["JSONView"] | str | int | float | bool | None
JSONObjectView: TypeAlias = Mapping[str, JSONView]
LooseJSON: TypeAlias = Any
LooseJSONObject: TypeAlias = dict[str, Any]

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")

# How deep arrays and objects may nest in a JSON value from outside (an HTTP body, `--result`, MCP
# arguments): far deeper than any call's arguments, and where the MCP SDK's own parser (pydantic-core)
# stops. Python's encoder and decoder recurse, so much deeper values would end in a RecursionError.
MAX_DEPTH = 200

# Built once: `json.dumps` with any option builds a new encoder on every call, and the journal
# writes several values per recorded call.
_COMPACT = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)
# For values read from YAML (dates) and values shown in messages: what JSON has no form for is its text.
_CANONICAL_TEXT = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
_QUOTED = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, default=str)
_STRICT = json.JSONEncoder(allow_nan=False)
_NAMED_CONSTANTS = json.JSONDecoder(parse_constant=str)
_PLAIN = json.JSONDecoder()
# What `json.loads` calls for the value itself, past its checks for bytes and surrounding whitespace.
_SCAN: Callable[[str, int], tuple[LooseJSON, int]] = _PLAIN.scan_once  # type: ignore[attr-defined]


def loads(text: str) -> LooseJSON:
    """`json.loads(text)`, the same value or error, without its per-call overhead on text as `compact`
    writes it (nothing around the value): what a store reads many rows of goes through this."""
    if type(text) is str:
        try:
            value, end = _SCAN(text, 0)
        except (StopIteration, ValueError):
            return json.loads(text)  # for its own error
        if end == len(text):
            return value
    return json.loads(text)


def compact(value: JSONView) -> str:
    """Compact JSON as the journal stores it (UTF-8 text, no spaces)."""
    return _COMPACT.encode(value)


def canonical(value: JSONView, *, text_fallback: bool = False) -> str:
    """Compact JSON with sorted keys: equal values give equal text. With `text_fallback`, a value JSON has
    no form for (a YAML date) is written as its text instead of raising TypeError."""
    return (_CANONICAL_TEXT if text_fallback else _CANONICAL).encode(value)


def quoted(value: object) -> str:
    """A value as messages quote it: compact JSON, and the text of anything JSON has no form for."""
    return _QUOTED.encode(value)


def digest(*parts: JSONView) -> str:
    """Lowercase hex SHA-256 of the canonical JSON of `parts`."""
    return hashlib.sha256(canonical(list(parts)).encode()).hexdigest()


def _fallback(value: object) -> object:
    dump = getattr(value, "model_dump", None)  # pydantic models and the like
    if callable(dump):
        return dump(mode="json")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):  # slots ones have no __dict__
        return {f.name: getattr(value, f.name) for f in dataclasses.fields(value) if not f.name.startswith("_")}
    if hasattr(value, "__dict__"):
        return {k: v for k, v in vars(value).items() if not k.startswith("_")}
    return str(value)


_ANY = json.JSONEncoder(default=_fallback, ensure_ascii=False)


def to_json(value: object) -> JSON:
    """A result as JSON: plain values as they are, models and objects by their fields, else their text.

    Never raises: what a call returned is journaled whatever it is. A value JSON cannot hold (one
    that contains itself, or nests too deep) is kept as its `repr`; a float JSON has no number for
    becomes its name (`"NaN"`, `"Infinity"`, `"-Infinity"`); each lone surrogate (which has no UTF-8
    form, so could not be stored) becomes U+FFFD.
    """
    try:
        text = _ANY.encode(value)
    except (TypeError, ValueError, RecursionError):
        text = json.dumps(_shown(value), ensure_ascii=False)
    decoded: JSON = _NAMED_CONSTANTS.decode(valid_text(text))
    return decoded


def _shown(value: object) -> str:
    try:
        return repr(value)
    except Exception:  # a repr that fails, or recurses too deep, still leaves the type's name
        return f"<{type(value).__name__}>"


def valid_text(text: str) -> str:
    """`text` with each lone surrogate (no UTF-8 form, so it could not be stored) replaced by U+FFFD."""
    return _LONE_SURROGATE.sub("\ufffd", text)


def has_lone_surrogate(value: JSONView) -> bool:
    """Whether a JSON value holds text that is not valid Unicode (a lone surrogate, as `"\\ud800"` decodes to)."""
    return _LONE_SURROGATE.search(compact(value)) is not None


def too_deep(what: str) -> BadInput:
    return BadInput(f"{what}: JSON nested deeper than {MAX_DEPTH} levels")


def parse_json(text: str, what: str, decoder: json.JSONDecoder = _PLAIN) -> LooseJSON:
    """The JSON value `text` holds (`what` names it in errors: a flag, "the body").

    Raises:
        BadInput: not JSON (or refused by one of `decoder`'s hooks), or nested deeper than MAX_DEPTH.
    """
    try:
        value = decoder.decode(text)
    except RecursionError:
        raise too_deep(what) from None
    except ValueError as exc:  # JSONDecodeError, and the hooks' own refusals
        raise BadInput(f"{what} is not JSON: {exc}") from None
    if text.count("[") + text.count("{") > MAX_DEPTH and _problem(value) == _TOO_DEEP:
        raise too_deep(what)
    return value


def checked_arguments(args: object, what: str = "arguments") -> JSON:
    """Arguments must already be plain JSON (they are journaled and sent to compensators as they are).

    Raises:
        BadInput: the value cannot be written as JSON, or nests deeper than MAX_DEPTH.
    """
    problem = _problem(args)
    if problem == _TOO_DEEP:
        raise too_deep(what)
    try:
        text = _STRICT.encode(args)
    except (TypeError, ValueError) as exc:
        raise BadInput(f"{what} must be JSON values: {exc}") from exc
    if problem is not None:  # JSON would turn it into text, silently (and {1: "a", "1": "b"} into one key)
        raise BadInput(f"{what} must be JSON values: an object's keys are strings, not {problem[1]!r}")
    checked: JSON = json.loads(text)
    return checked


_TOO_DEEP = ("too deep", None)


def _problem(value: object) -> tuple[str, object] | None:
    """`("key", KEY)` for the first key that is not text, _TOO_DEEP past MAX_DEPTH levels (so a value
    that holds itself ends too), else None; walked without recursing."""
    stack = [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, (dict, list, tuple)) and level > MAX_DEPTH:
            return _TOO_DEEP
        if isinstance(item, dict):
            for key, child in item.items():
                if not isinstance(key, str):
                    return ("key", key)
                stack.append((child, level + 1))
        elif isinstance(item, (list, tuple)):
            stack.extend((child, level + 1) for child in item)
    return None
