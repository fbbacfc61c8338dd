"""A starting manifest for a server's tools, written as YAML with every guess marked `# REVIEW:`. Pure.

What is guessed: `effect: read` from `readOnlyHint`, and an undo from a pair of names (`create_X`
and `delete_X`, `add_X` and `remove_X`, `star_X` and `unstar_X`, ...) whose required arguments can
all be filled from the call's own arguments or its result (same name, or the `name`/`id` of each
item of a list). A pair whose arguments cannot all be filled is written commented out; a write tool
with no guess is left with no undo, which `reversi manifest check` warns about. `idempotentHint` is
only noted: a repeat that changes nothing more says nothing of the first call, and Reversi's
`idempotent: true` would skip the tool in rollbacks.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from typing import Any

from reversi.core.tool_listing import ListedTool, Listing, arguments_fit

__all__ = ["draft_manifest", "undo_candidates"]

# A verb, and the verbs of the calls that would take it back.
_UNDO_VERBS: dict[str, tuple[str, ...]] = {
    "create": ("delete", "remove", "destroy"),
    "add": ("remove", "delete"),
    "insert": ("delete", "remove"),
    "upload": ("delete", "remove"),
    "open": ("close",),
    "attach": ("detach",),
    "detach": ("attach",),
}
for _do, _undo in (("star", "unstar"), ("follow", "unfollow"), ("lock", "unlock"), ("pin", "unpin"),
                   ("assign", "unassign"), ("subscribe", "unsubscribe"), ("mute", "unmute"),
                   ("block", "unblock"), ("archive", "unarchive"), ("publish", "unpublish"),
                   ("resolve", "unresolve"), ("watch", "unwatch"), ("enable", "disable")):
    _UNDO_VERBS[_do], _UNDO_VERBS[_undo] = (_undo,), (_do,)
_WORDS = re.compile(r"[_\-.]|[A-Z]+(?![a-z])|[A-Z]?[a-z0-9]+")
_LIST_OF = re.compile(r"(?i)^(?:.*?)(names|ids)$")  # `entityNames`, `label_ids`, `names`


def undo_candidates(name: str) -> Iterator[str]:
    """Names that would undo a tool called `name`, by its verb: `create_entities` gives
    `delete_entities`, `remove_entities`, `destroy_entities`; `createIssue` gives `deleteIssue`, ..."""
    words = _WORDS.findall(name)
    if "".join(words) != name:
        return
    for index, word in enumerate(words):
        for undo in _UNDO_VERBS.get(word.lower(), ()):
            written = undo.capitalize() if word[:1].isupper() else undo
            yield "".join([*words[:index], written, *words[index + 1:]])


def draft_manifest(listing: Listing) -> str:
    """The draft, as YAML text (ends with a newline)."""
    lines = [
        f"# Drafted by `reversi manifest draft` from {listing.describe()}.",
        "# Every guess is marked REVIEW: read each one, fix what is wrong, then run `reversi manifest check`",
        "# against the server, and a drill for each undo (`reversi manifest drill`).",
        "version: 1",
        "tools:",
    ]
    for tool in listing.tools:
        lines += [f"  {_text(tool.name)}:", *(f"    {line}" for line in _entry(tool, listing))]
    return "\n".join(lines) + "\n"


def _entry(tool: ListedTool, listing: Listing) -> list[str]:
    if not tool.writes:
        return ["effect: read"]
    lines: list[str] = []
    if tool.read_only_hint is None:
        lines.append("# REVIEW: the server does not say whether it only reads: taken as a write")
    if tool.destructive_hint:
        lines.append("# REVIEW: the server marks it destructive: what it destroys cannot be put back from its "
                     "arguments alone")
    if tool.idempotent_hint:
        lines.append("# REVIEW: the server marks it idempotent (a repeat changes nothing more); if its first call "
                     "changes nothing either, say idempotent: true and a rollback skips it")
    for undo in (listing.get(name) for name in undo_candidates(tool.name)):
        if undo is None or not undo.writes:
            continue
        args = _guess_arguments(tool, undo)
        block = ["compensation:", f"  tool: {_text(undo.name)}", "  args:" if args else "  args: {}"]
        unknown = [key for key, (value, _) in args.items() if value is None]
        if not unknown:
            block += [f"    {_text(key)}: {_text(value or '')}  # REVIEW: {why}" for key, (value, why) in args.items()]
            return [*lines, f"# REVIEW: undo guessed from the names {tool.name} / {undo.name}", *block]
        block += [f"    {_text(key)}: {'...' if value is None else _text(value)}" for key, (value, _) in args.items()]
        return [*lines, f"# REVIEW: {undo.name} looks like its undo, but {', '.join(unknown)} could not be guessed: "
                        "fill in, uncomment", *(f"# {line}" for line in block)]
    return [*lines, "# REVIEW: no undo found among the server's tools: add a compensation, or say it is "
                    "irreversible: true", "{}"]


def _guess_arguments(tool: ListedTool, undo: ListedTool) -> dict[str, tuple[str | None, str]]:
    """For each argument the undo requires: a reference that fills it and why, or None (not guessed)."""
    required, _, _ = arguments_fit(undo.input_schema, [])
    inputs = _properties(tool.input_schema)
    outputs = _properties(tool.output_schema or {})
    wanted = _properties(undo.input_schema)
    guessed: dict[str, tuple[str | None, str]] = {}
    for name in required:
        guessed[name] = _guess(name, wanted.get(name, {}), inputs, outputs)
    return guessed


def _guess(name: str, wanted: Mapping[str, Any], inputs: Mapping[str, Any],
           outputs: Mapping[str, Any]) -> tuple[str | None, str]:
    # What the call answered comes first: it says what was done, where the arguments say what was asked.
    places = (("result", outputs, "call's result"), ("args", inputs, "call's argument"))
    for root, found, where in places:
        if name in found and _is_list(found[name]) == _is_list(wanted):
            return f"${root}.{name}", f"the {where} of the same name"
    if _LIST_OF.match(name) and _is_list(wanted):
        key = "id" if name.lower().endswith("ids") else "name"
        for root, found, where in places:
            for prop, schema in found.items():
                if _is_list(schema) and key in _properties(schema.get("items") or {}):
                    return f"${root}.{prop}[*].{key}", f"the {key} of each in the {where} {prop}"
    return None, ""


def _properties(schema: Mapping[str, Any]) -> Mapping[str, Any]:
    found = schema.get("properties")
    return found if isinstance(found, Mapping) else {}


def _is_list(schema: Any) -> bool:
    kind = schema.get("type") if isinstance(schema, Mapping) else None
    return kind == "array" or (isinstance(kind, list) and "array" in kind)


def _text(value: str) -> str:
    """A YAML scalar for `value`: plain when that reads back as the same string, else JSON-quoted."""
    if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.\-]*", value) and value.lower() not in _YAML_WORDS:
        return value
    return json.dumps(value, ensure_ascii=False)


_YAML_WORDS = frozenset({"true", "false", "yes", "no", "on", "off", "null", "y", "n", "~"})
