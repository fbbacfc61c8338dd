"""References in manifest templates: `$args.PATH`, `$result.PATH`, `$run.id`, `$step`, `${...}` text.

A string that is exactly one reference is replaced by the value it names (any JSON type); a string
with `${...}` parts is interpolated as text; `$$` stands for a literal `$`. Parsed strings are cached,
since the planner resolves the same few templates for every step of a run.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from reversi.core.json_values import compact

__all__ = [
    "MissingReference",
    "ReferenceContext",
    "RunContext",
    "bad_references",
    "references_to",
    "resolve",
    "result_references",
]

_KEY = r"[^.\[\]\s${}]+"
_BODY = re.compile(
    rf"(?P<root>args|result)(?P<path>(?:\.{_KEY}|\[\d+\]|\[\*\])*)"
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
    """

    args: Any
    result: Any
    run: RunContext
    step: int


@dataclass(frozen=True)
class _Ref:
    written: str
    root: str  # "args", "result", "run" or "step"
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
        return {key: resolve(value, ctx) for key, value in template.items()}
    if isinstance(template, list | tuple):
        return [resolve(item, ctx) for item in template]
    return template


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
    """Every reference to `root` (`"args"` or `"result"`) a template makes, as `result_references`."""
    found: dict[str, tuple[str | int | None, ...]] = {}
    for text in _texts(template):
        parsed = _parse(text)
        refs = [parsed] if isinstance(parsed, _Ref) else list(parsed.parts) if isinstance(parsed, _Text) else []
        found.update((r.written, r.path) for r in refs if isinstance(r, _Ref) and r.root == root)
    return list(found.items())


def _texts(template: Any) -> Iterator[str]:
    """The template's strings that hold a `$`, in order (mapping keys are not templates)."""
    if isinstance(template, str):
        if "$" in template:
            yield template
    elif isinstance(template, Mapping):
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
    if ctx.result is None:
        raise MissingReference(ref.written)
    return _walk(ctx.result, ref.path, ref.written)


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
