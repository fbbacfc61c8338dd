"""References in manifest templates: `$args.PATH`, `$result.PATH`, `$before.PATH`, `$run.id`, `$step`,
`${...}` text, and the two template forms `{$each: REF, as: TEMPLATE}` and `{$search: REF, pattern: RE}`.

A string that is exactly one reference is replaced by the value it names (any JSON type); a string
with `${...}` parts is interpolated as text; `$$` stands for a literal `$`. `$each` builds a list: the
`as` template resolved once per element of the list REF names, with `$item` naming the element.
`$search` is the first match of a regular expression (run on RE2, `reversi.core.patterns`) in the text
REF names (its first group when it has one). Parsed strings are cached, since the planner resolves the
same few templates for every step of a run.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any

from reversi.core.json_values import compact
from reversi.core.patterns import first_match

__all__ = [
    "EACH",
    "NOTHING",
    "SEARCH",
    "MissingReference",
    "ReferenceContext",
    "RunContext",
    "bad_references",
    "is_reference",
    "reference_roots",
    "references_to",
    "resolve",
    "result_references",
]

EACH, SEARCH = "$each", "$search"
NOTHING: Any = type("Nothing", (), {"__repr__": lambda self: "NOTHING", "__slots__": ()})()
"""What `before` and `item` are when there is none: every reference to them names nothing."""

_KEY = r"[^.\[\]\s${}]+"
_BODY = re.compile(
    rf"(?P<root>args|result|before|item)(?P<path>(?:\.{_KEY}|\[\d+\]|\[\*\])*)"
    r"|run\.(?P<field>id|actor|tenant|environment)|step"
)
_STEP = re.compile(rf"\.(?P<key>{_KEY})|\[(?P<index>\d+)\]|\[\*\]")
# `${` without its closing brace takes the rest of the string, so it is reported as written.
_TOKEN = re.compile(r"\$\$|\$\{[^}]*\}?")

_PathStep = str | int | None  # key, index, or None for `[*]`


class MissingReference(Exception):
    """A reference named nothing (e.g. `$result.id` when the result has no `id`).

    Attributes:
        ref: The reference as written, `${...}` parts given in their `$...` form.
    """

    def __init__(self, ref: str) -> None:
        super().__init__(f"reference {ref} names nothing")
        self.ref = ref


@dataclass(frozen=True)
class RunContext:
    """What `$run.*` references name."""

    id: str
    actor: str
    tenant: str
    environment: str


@dataclass(frozen=True)
class ReferenceContext:
    """Everything a template may refer to.

    Attributes:
        args: The call's arguments (a JSON value).
        result: The call's result as JSON; None when there is none, which makes every `$result`
            reference missing.
        run: The run the call belongs to.
        step: The call's step number.
        before: What the entry's capture read before the call; NOTHING when there is none.
        item: The element a `$each` template is resolved for; NOTHING outside one.
    """

    args: Any
    result: Any
    run: RunContext
    step: int
    before: Any = NOTHING
    item: Any = NOTHING


@dataclass(frozen=True)
class _Ref:
    written: str
    root: str  # "args", "result", "before", "item", "run" or "step"
    path: tuple[_PathStep, ...]  # for "run": the one field name


@dataclass(frozen=True)
class _Text:
    parts: tuple[str | _Ref, ...]


@dataclass(frozen=True)
class _Bad:
    refs: tuple[str, ...]


def resolve(template: Any, ctx: ReferenceContext) -> Any:
    """Resolve every reference in a JSON-like template; mapping keys are left as they are.

    Args:
        template: Dicts, lists, strings and scalars, as read from a manifest.
        ctx: The call the references are about.

    Returns:
        A new JSON value with each reference replaced.

    Raises:
        MissingReference: A reference named nothing.
        ValueError: The template holds a bad reference (manifests are checked before this runs).
    """
    if isinstance(template, str):
        return _resolve_text(template, ctx) if "$" in template else template
    if isinstance(template, Mapping):
        if EACH in template:
            return _each(template, ctx)
        if SEARCH in template:
            return _search(template, ctx)
        return {key: resolve(value, ctx) for key, value in template.items()}
    if isinstance(template, list | tuple):
        return [resolve(item, ctx) for item in template]
    return template


def _each(template: Mapping[str, Any], ctx: ReferenceContext) -> list[Any]:
    written = template[EACH]
    items = resolve(written, ctx)
    if not isinstance(items, list):
        raise MissingReference(f"{written} (not a list, for $each)")
    return [resolve(template.get("as"), replace(ctx, item=item)) for item in items]


def _search(template: Mapping[str, Any], ctx: ReferenceContext) -> Any:
    written, pattern = template[SEARCH], str(template.get("pattern", ""))
    text = resolve(written, ctx)
    match = first_match(pattern, text) if isinstance(text, str) else None
    if match is None:
        raise MissingReference(f"{written} (no match for {pattern!r})")
    if template.get("number") is True:
        return _number(written, match)
    return match


def _number(written: str, text: str) -> int | float:
    """`text` read as a JSON number (`number: true` in a `$search`: an id in a URL, for a tool that wants a number)."""
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise MissingReference(f"{written} (the match {text[:40]!r} is not a number)")
    return value


def is_reference(text: str) -> bool:
    """Whether `text` is exactly one good reference (`$args.dryRun`), not text with parts."""
    return isinstance(_parse(text), _Ref)


def reference_roots(template: Any) -> set[str]:
    """The roots (`args`, `result`, `before`, `item`, `run`, `step`) a template's references use,
    `$each` and `$search` forms included; bad references are left out."""
    return {ref.root for ref in _refs(template)}


def bad_references(template: Any) -> list[str]:
    """Every bad reference in a template, as written, in order; mapping keys are not checked.

    A whole string that begins with `$` is returned entire; a bad `${...}` part inside text is
    returned alone.
    """
    found: list[str] = []
    for text in _texts(template):
        parsed = _parse(text)
        if isinstance(parsed, _Bad):
            found.extend(parsed.refs)
    return found


def result_references(template: Any) -> list[tuple[str, tuple[str | int | None, ...]]]:
    """Every `$result` reference a template makes, once each in order: as written (`$result.id`)
    and as its path (`("id",)`; an index is an int, `[*]` is None). Bad references are left out."""
    return references_to(template, "result")


def references_to(template: Any, root: str) -> list[tuple[str, tuple[str | int | None, ...]]]:
    """Every reference to `root` (`"args"`, `"result"`, `"before"`) a template makes, as `result_references`."""
    found = {ref.written: ref.path for ref in _refs(template) if ref.root == root}
    return list(found.items())


def _refs(template: Any) -> Iterator[_Ref]:
    """Every good reference a template makes, in order."""
    for text in _texts(template):
        parsed = _parse(text)
        if isinstance(parsed, _Ref):
            yield parsed
        elif isinstance(parsed, _Text):
            yield from (part for part in parsed.parts if isinstance(part, _Ref))


def _texts(template: Any) -> Iterator[str]:
    """The template's strings that hold a `$`, in order (mapping keys are not templates)."""
    if isinstance(template, str):
        if "$" in template:
            yield template
    elif isinstance(template, Mapping):
        if SEARCH in template:  # its pattern is a regular expression, where `$` is an anchor
            yield from _texts(template[SEARCH])
            return
        for value in template.values():
            yield from _texts(value)
    elif isinstance(template, list | tuple):
        for item in template:
            yield from _texts(item)


def _resolve_text(text: str, ctx: ReferenceContext) -> Any:
    parsed = _parse(text)
    if isinstance(parsed, str):
        return parsed
    if isinstance(parsed, _Ref):
        return _value(parsed, ctx)
    if isinstance(parsed, _Text):
        return "".join(part if isinstance(part, str) else _render(_value(part, ctx)) for part in parsed.parts)
    raise ValueError(f"bad reference {parsed.refs[0]!r}")


def _render(value: Any) -> str:
    if isinstance(value, str):
        return value
    return compact(value)


@lru_cache(maxsize=8192)
def _parse(text: str) -> str | _Ref | _Text | _Bad:
    if text.startswith("$") and not text.startswith(("$$", "${")):
        ref = _parse_ref(text[1:])
        return ref if ref is not None else _Bad((text,))
    parts: list[str | _Ref] = []
    bad: list[str] = []
    pos = 0
    for match in _TOKEN.finditer(text):
        parts.append(text[pos : match.start()])
        token = match.group()
        if token == "$$":
            parts.append("$")
        else:
            ref = _parse_ref(token[2:-1]) if token.endswith("}") else None
            if ref is None:
                bad.append(token)
            else:
                parts.append(ref)
        pos = match.end()
    parts.append(text[pos:])
    if bad:
        return _Bad(tuple(bad))
    if all(isinstance(part, str) for part in parts):
        return "".join(part for part in parts if isinstance(part, str))
    return _Text(tuple(_join_strings(parts)))


def _join_strings(parts: list[str | _Ref]) -> list[str | _Ref]:
    joined: list[str | _Ref] = []
    for part in parts:
        if isinstance(part, str) and joined and isinstance(joined[-1], str):
            joined[-1] += part
        elif part != "":
            joined.append(part)
    return joined


def _parse_ref(body: str) -> _Ref | None:
    match = _BODY.fullmatch(body)
    if match is None:
        return None
    written = "$" + body
    if match["root"]:
        path = tuple(_path_step(step) for step in _STEP.finditer(match["path"]))
        return _Ref(written, match["root"], path)
    if match["field"]:
        return _Ref(written, "run", (match["field"],))
    return _Ref(written, "step", ())


def _path_step(step: re.Match[str]) -> _PathStep:
    if step["key"] is not None:
        return step["key"]
    if step["index"] is not None:
        return int(step["index"])
    return None


def _value(ref: _Ref, ctx: ReferenceContext) -> Any:
    if ref.root == "step":
        return ctx.step
    if ref.root == "run":
        return getattr(ctx.run, str(ref.path[0]))
    if ref.root == "args":
        return _walk(ctx.args, ref.path, ref.written)
    value = {"result": ctx.result, "before": ctx.before, "item": ctx.item}[ref.root]
    if (value is None and ref.root == "result") or value is NOTHING:
        raise MissingReference(ref.written)
    return _walk(value, ref.path, ref.written)


def _walk(value: Any, path: tuple[_PathStep, ...], written: str) -> Any:
    for i, step in enumerate(path):
        if step is None:
            if not isinstance(value, list | tuple):
                raise MissingReference(written)
            return [_walk(item, path[i + 1 :], written) for item in value]
        if isinstance(step, int):
            if not isinstance(value, list | tuple) or step >= len(value):
                raise MissingReference(written)
        elif not isinstance(value, Mapping) or step not in value:
            raise MissingReference(written)
        value = value[step]
    return value
