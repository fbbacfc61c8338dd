"""References in manifest templates: `$args.PATH`, `$result.PATH`, `$before.PATH`, `$run.id`, `$step`,
`$result_text` and `$before_text` (a text answer as it came, before any JSON reading of it), `${...}`
text, and the template forms below.

A string that is exactly one reference is replaced by the value it names (any JSON type); a string
with `${...}` parts is interpolated as text; `$$` stands for a literal `$`. The forms:

- `{$each: REF, as: TEMPLATE}` builds a list: `as` resolved once per element of the list REF names,
  with `$item` naming the element.
- `{$search: REF, pattern: RE, group: N, number: B}` is the first match of a regular expression (run
  on RE2, `reversi.core.patterns`) in the text REF names: group N of it, else its first group when it
  has one, else the whole match.
- `{$optional: REF, default: TEMPLATE}` is what REF names, or, when it names nothing, `default`; with
  no default the value is left out of the mapping or list that holds it.
- `{$format: TEXT, NAME: TEMPLATE, ...}` is TEXT with each `{NAME}` replaced by the text of its
  template (`{{` and `}}` are braces); TEXT itself holds no references.
- `{$sql_identifier: TEMPLATE}` and `{$sql_text: TEMPLATE}` quote a text for SQL (`"na""me"`,
  `'it''s'`); `{$argument: TEMPLATE}` is a text that can be one element of an argument list and not be
  taken for an option (it names nothing when it begins with `-`).

Parsed strings are cached, since the planner resolves the same few templates for every step of a run.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from functools import lru_cache

from reversi.core.json_values import JSONView, LooseJSON, compact
from reversi.core.patterns import first_match
from reversi.errors import MissingReference

__all__ = [
    "ARGUMENT",
    "EACH",
    "FORMAT",
    "FORMS",
    "NOTHING",
    "OPTIONAL",
    "QUOTES",
    "SEARCH",
    "SQL_IDENTIFIER",
    "SQL_TEXT",
    "MissingReference",
    "ReferenceContext",
    "RunContext",
    "bad_references",
    "format_names",
    "is_reference",
    "reference_roots",
    "references_to",
    "resolve",
    "result_references",
]

EACH, SEARCH, OPTIONAL, FORMAT = "$each", "$search", "$optional", "$format"
SQL_IDENTIFIER, SQL_TEXT, ARGUMENT = "$sql_identifier", "$sql_text", "$argument"
QUOTES = (SQL_IDENTIFIER, SQL_TEXT, ARGUMENT)
FORMS = (EACH, SEARCH, OPTIONAL, FORMAT, *QUOTES)
"""The keys that make a mapping a template form rather than a mapping of templates."""
_OMITTED: object = type("Omitted", (), {"__repr__": lambda self: "OMITTED", "__slots__": ()})()
NOTHING: object = type("Nothing", (), {"__repr__": lambda self: "NOTHING", "__slots__": ()})()
"""What `before` and `item` are when there is none: every reference to them names nothing."""

_KEY = r"[^.\[\]\s${}]+"
_BODY = re.compile(
    rf"(?P<root>args|result|before|item)(?P<path>(?:\.{_KEY}|\[\d+\]|\[\*\])*)"
    r"|run\.(?P<field>id|actor|tenant|environment)|step|(?P<text>result_text|before_text)"
)
_STEP = re.compile(rf"\.(?P<key>{_KEY})|\[(?P<index>\d+)\]|\[\*\]")
# `${` without its closing brace takes the rest of the string, so it is reported as written.
_TOKEN = re.compile(r"\$\$|\$\{[^}]*\}?")

_PathStep = str | int | None  # key, index, or None for `[*]`


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
        before_absent: What the capture's error said when it found nothing to read, if it did.
        result_text, before_text: The result's (the capture's) text as it came, when it was read as JSON.
    """

    args: LooseJSON
    result: LooseJSON
    run: RunContext
    step: int
    before: LooseJSON = NOTHING
    item: LooseJSON = NOTHING
    before_absent: str | None = None
    result_text: str | None = None
    before_text: str | None = None


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


def resolve(template: JSONView, ctx: ReferenceContext) -> LooseJSON:
    """Resolve every reference in a JSON-like template; mapping keys are left as they are.

    Args:
        template: Dicts, lists, strings and scalars, as read from a manifest.
        ctx: The call the references are about.

    Returns:
        A new JSON value with each reference replaced, shaped as the template (loosely typed: what its
        references name has the shape of the values they name).

    Raises:
        MissingReference: A reference named nothing.
        ValueError: The template holds a bad reference (manifests are checked before this runs).
    """
    value = _resolve(template, ctx)
    if value is _OMITTED:
        assert isinstance(template, Mapping)  # only an `$optional` form resolves to nothing
        raise MissingReference(compact(template[OPTIONAL]))
    return value


def _resolve(template: JSONView, ctx: ReferenceContext) -> LooseJSON:
    """`resolve`, where an `$optional` that names nothing is `_OMITTED` (its holder leaves it out)."""
    if isinstance(template, str):
        return _resolve_text(template, ctx) if "$" in template else template
    if isinstance(template, Mapping):
        form = _form(template)
        if form is not None:
            return form(template, ctx)
        resolved = {key: _resolve(value, ctx) for key, value in template.items()}
        return {key: value for key, value in resolved.items() if value is not _OMITTED}
    if isinstance(template, list | tuple):
        return [value for value in (_resolve(item, ctx) for item in template) if value is not _OMITTED]
    return template


_Form = Callable[[Mapping[str, JSONView], ReferenceContext], LooseJSON]


def _form(template: Mapping[str, JSONView]) -> _Form | None:
    for name in FORMS:
        if name in template:
            return _FORMS[name]
    return None


def _optional(template: Mapping[str, JSONView], ctx: ReferenceContext) -> LooseJSON:
    try:
        return resolve(template[OPTIONAL], ctx)
    except MissingReference:
        return resolve(template["default"], ctx) if "default" in template else _OMITTED


_FIELD = re.compile(r"\{\{|\}\}|\{([^{}]*)\}")


def format_names(text: str) -> list[str]:
    """The names a `$format` text's `{NAME}` parts use, in order (`{{` and `}}` are braces)."""
    return [m[1] for m in _FIELD.finditer(text) if m[1] is not None]


def _format(template: Mapping[str, JSONView], ctx: ReferenceContext) -> str:
    def part(match: re.Match[str]) -> str:
        if match[1] is None:
            return match[0][0]
        return _render(resolve(template[match[1]], ctx))

    return _FIELD.sub(part, str(template[FORMAT]))


def _quoted(template: Mapping[str, JSONView], ctx: ReferenceContext) -> str:
    name = next(form for form in QUOTES if form in template)
    value = resolve(template[name], ctx)
    if not isinstance(value, str | int | float) or isinstance(value, bool) or "\x00" in str(value):
        raise MissingReference(f"{compact(template[name])} (not a text {name} can quote)")
    text = str(value)
    if name == SQL_IDENTIFIER:
        return '"' + text.replace('"', '""') + '"'
    if name == SQL_TEXT:
        return "'" + text.replace("'", "''") + "'"
    if not text or text.startswith("-"):
        raise MissingReference(f"{compact(template[name])} ({compact(text)} could be taken for an option)")
    return text


def _each(template: Mapping[str, JSONView], ctx: ReferenceContext) -> list[LooseJSON]:
    written = template[EACH]
    items = resolve(written, ctx)
    if not isinstance(items, list):
        raise MissingReference(f"{written} (not a list, for $each)")
    found = (_resolve(template.get("as"), replace(ctx, item=item)) for item in items)
    return [value for value in found if value is not _OMITTED]


def _search(template: Mapping[str, JSONView], ctx: ReferenceContext) -> LooseJSON:
    written, pattern = template[SEARCH], str(template.get("pattern", ""))
    text = resolve(written, ctx)
    group = template.get("group")
    match = first_match(pattern, text, group if isinstance(group, int) else None) if isinstance(text, str) else None
    if match is None:
        raise MissingReference(f"{written} (no match for {pattern!r})")
    if template.get("number") is True:
        return _number(written, match)
    return match


_FORMS: dict[str, _Form] = {
    EACH: _each, SEARCH: _search, OPTIONAL: _optional, FORMAT: _format,
    SQL_IDENTIFIER: _quoted, SQL_TEXT: _quoted, ARGUMENT: _quoted,
}


def _number(written: JSONView, text: str) -> int | float:
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


def reference_roots(template: JSONView) -> set[str]:
    """The roots (`args`, `result`, `before`, `item`, `run`, `step`) a template's references use,
    `$each` and `$search` forms included; bad references are left out."""
    return {ref.root for ref in _refs(template)}


def bad_references(template: JSONView) -> list[str]:
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


def result_references(template: JSONView) -> list[tuple[str, tuple[str | int | None, ...]]]:
    """Every `$result` reference a template makes, once each in order: as written (`$result.id`)
    and as its path (`("id",)`; an index is an int, `[*]` is None). Bad references are left out."""
    return references_to(template, "result")


def references_to(
    template: JSONView, root: str, *, optional: bool = True
) -> list[tuple[str, tuple[str | int | None, ...]]]:
    """Every reference to `root` (`"args"`, `"result"`, `"before"`) a template makes, as `result_references`;
    without those inside an `$optional` form when `optional` is false (those a missing value cannot fail)."""
    found = {ref.written: ref.path for ref in _refs(template, optional) if ref.root == root}
    return list(found.items())


def _refs(template: JSONView, optional: bool = True) -> Iterator[_Ref]:
    """Every good reference a template makes, in order."""
    for text in _texts(template, optional):
        parsed = _parse(text)
        if isinstance(parsed, _Ref):
            yield parsed
        elif isinstance(parsed, _Text):
            yield from (part for part in parsed.parts if isinstance(part, _Ref))


def _texts(template: JSONView, optional: bool = True) -> Iterator[str]:
    """The template's strings that hold a `$`, in order (mapping keys are not templates); without those of
    `$optional` forms when `optional` is false."""
    if isinstance(template, str):
        if "$" in template:
            yield template
    elif isinstance(template, Mapping):
        if SEARCH in template:  # its pattern is a regular expression, where `$` is an anchor
            yield from _texts(template[SEARCH], optional)
            return
        if OPTIONAL in template and not optional:
            return
        for key, value in template.items():
            if key != FORMAT:  # its text is literal but for `{NAME}`
                yield from _texts(value, optional)
    elif isinstance(template, list | tuple):
        for item in template:
            yield from _texts(item, optional)


def _resolve_text(text: str, ctx: ReferenceContext) -> LooseJSON:
    parsed = _parse(text)
    if isinstance(parsed, str):
        return parsed
    if isinstance(parsed, _Ref):
        return _value(parsed, ctx)
    if isinstance(parsed, _Text):
        return "".join(part if isinstance(part, str) else _render(_value(part, ctx)) for part in parsed.parts)
    raise ValueError(f"bad reference {parsed.refs[0]!r}")


def _render(value: JSONView) -> str:
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
    if match["text"]:
        return _Ref(written, match["text"], ())
    return _Ref(written, "step", ())


def _path_step(step: re.Match[str]) -> _PathStep:
    if step["key"] is not None:
        return step["key"]
    if step["index"] is not None:
        return int(step["index"])
    return None


def _value(ref: _Ref, ctx: ReferenceContext) -> LooseJSON:
    if ref.root == "step":
        return ctx.step
    if ref.root in ("result_text", "before_text"):
        return _as_text(ref, ctx)
    if ref.root == "run":
        return getattr(ctx.run, str(ref.path[0]))
    if ref.root == "args":
        return _walk(ctx.args, ref.path, ref.written)
    value = {"result": ctx.result, "before": ctx.before, "item": ctx.item}[ref.root]
    if (value is None and ref.root == "result") or value is NOTHING:
        raise MissingReference(ref.written)
    return _walk(value, ref.path, ref.written)


def _as_text(ref: _Ref, ctx: ReferenceContext) -> str:
    """`$result_text` / `$before_text`: the text the tool answered, as it came; the value itself when it
    is a text; nothing when the answer was not text (structured content, or a value from the SDK)."""
    kept, value = (ctx.result_text, ctx.result) if ref.root == "result_text" else (ctx.before_text, ctx.before)
    if kept is not None:
        return kept
    if isinstance(value, str):
        return value
    raise MissingReference(ref.written)


def _walk(value: LooseJSON, path: tuple[_PathStep, ...], written: str) -> LooseJSON:
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
