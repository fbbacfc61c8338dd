"""A starting manifest for a server's tools, written as YAML with every guess marked `# REVIEW:`. Pure.

What is guessed: `effect: read` from `readOnlyHint`, and an undo from a pair of names (`create_X`
and `delete_X`, `add_X` and `remove_X`, `star_X` and `unstar_X`, ...) whose required arguments can
all be filled from the call's own arguments or its result (same name, or the `name`/`id` of each
item of a list). A pair whose arguments cannot all be filled is written commented out. Where no such
pair exists, the thing a tool changes is named by its last word (`create_memory_project` and
`delete_project` both act on a project), and:

* a move or rename with a pair of arguments to swap (`source`/`destination`, `from`/`to`, `old_*`/
  `new_*`) is its own undo;
* a tool that overwrites, edits, deletes or moves something a read tool of the same thing can read
  first (`read_note`, `get_note`, ...) gets that read as its `capture`, and an undo that puts back
  what it read: a write back (for a write, two alternatives: delete what it created, or write back
  what it overwrote), with a read-back; what the read answers is the server's own business, so
  every `$before` path is a guess to confirm with a drill.

An undo the server itself declares (SEP-3172 `recovery`, `x-compensation-pair`; see
`reversi.core.server_undo`) is written instead of any guess.

A write tool with no guess is left with no undo, which `reversi manifest check` warns about. `idempotentHint` is
only noted: a repeat that changes nothing more says nothing of the first call, and Reversi's
`idempotent: true` would skip the tool in rollbacks.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping

from reversi.core.json_values import JSONObjectView, JSONView, LooseJSON, quoted
from reversi.core.server_undo import DeclaredUndo, listing_undos
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
    declared, unusable = listing_undos(listing)
    for tool in listing.tools:
        said = [f"# REVIEW: {warning}" for warning in unusable if f" {quoted(tool.name[:80])} " in warning]
        entry = _declared(declared[tool.name]) if tool.name in declared else _entry(tool, listing)
        lines += [f"  {_text(tool.name)}:", *(f"    {line}" for line in [*said, *entry])]
    return "\n".join(lines) + "\n"


def _declared(undo: DeclaredUndo) -> list[str]:
    """The undo the server declares for a tool, as manifest text the operator then owns."""
    return [f"# REVIEW: the undo the server declares ({undo.convention}); once written here it is yours, and a",
            "# rollback uses it whatever the server lists later",
            "compensation:", f"  tool: {_text(undo.tool)}", "  args:" if undo.args else "  args: {}",
            *(f"    {_text(key)}: {_text(value) if isinstance(value, str) else json.dumps(value)}"
              for key, value in undo.args.items())]


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
    for undo in [*(listing.get(name) for name in undo_candidates(tool.name)), _by_noun(tool, listing)]:
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
    restoring = _restoring(tool, listing)
    if restoring:
        return [*lines, *restoring]
    return [*lines, "# REVIEW: no undo found among the server's tools: add a compensation, or say it is "
                    "irreversible: true", "{}"]


_READS = ("read", "get", "view", "show", "fetch", "describe")
_WRITES = ("write", "put", "set", "upsert", "save")  # may create, or overwrite
_CHANGES = ("update", "edit", "patch", "replace", "append", "modify")
_MOVES = ("move", "rename")
_DELETES = ("delete", "remove", "destroy", "trash")
_CREATES = ("create", "add", "insert", "new", "write", "put", "upload")
_IDENTIFYING = ("identifier", "id", "path", "file_path", "name", "title", "key", "slug", "permalink", "uri", "url")
_SWAPS = (("source", "destination"), ("from", "to"), ("src", "dst"), ("old_name", "new_name"),
          ("old_path", "new_path"), ("source_path", "destination_path"), ("path", "new_path"))


def _words(name: str) -> list[str]:
    return [w.lower() for w in _WORDS.findall(name.rsplit(".", 1)[-1]) if w not in "_-."]


def _verb(tool: ListedTool) -> str:
    return next((w for w in _words(tool.name) if w in (*_READS, *_WRITES, *_CHANGES, *_MOVES, *_DELETES, *_CREATES)),
                "")


def _noun(tool: ListedTool) -> str:
    words = _words(tool.name)
    return words[-1].removesuffix("s") if words else ""


def _of_noun(listing: Listing, noun: str, verbs: tuple[str, ...], writes: bool) -> ListedTool | None:
    """The first tool of the listing whose verb is one of `verbs` and whose last word names `noun`."""
    for verb in verbs:
        for other in listing.tools:
            if other.writes == writes and _noun(other) == noun and verb in _words(other.name):
                return other
    return None


def _by_noun(tool: ListedTool, listing: Listing) -> ListedTool | None:
    """The undo of a creating tool among tools of the same thing by its last word (`delete_project` for
    `create_memory_project`), when the names differ otherwise."""
    verb = _verb(tool)
    if verb not in _CREATES or verb in _WRITES:
        return None
    undo = _of_noun(listing, _noun(tool), _DELETES, writes=True)
    return undo if undo is not None and undo.name != tool.name else None


def _restoring(tool: ListedTool, listing: Listing) -> list[str]:
    """A move that swaps its arguments back, or a capture and an undo that puts back what it read."""
    verb, noun = _verb(tool), _noun(tool)
    inputs = _properties(tool.input_schema)
    if verb in _MOVES:
        pair = next(((a, b) for a, b in _SWAPS if a in inputs and b in inputs), None)
        if pair is not None:
            a, b = pair
            return [f"# REVIEW: its own undo, guessed from {a}/{b}: {tool.name} back the other way",
                    "compensation:", f"  tool: {_text(tool.name)}",
                    f"  args: {{{_text(a)}: \"$args.{b}\", {_text(b)}: \"$args.{a}\"}}", "  kind: inverse"]
    if verb not in (*_WRITES, *_CHANGES, *_MOVES, *_DELETES):
        return []
    read = _of_noun(listing, noun, _READS, writes=False)
    capture = _read_args(read, inputs) if read is not None else None
    if read is None or capture is None:
        return []
    lines = [f"# REVIEW: what it changes is read first with {read.name} ($before names the answer)", "capture:",
             f"  tool: {_text(read.name)}", f"  args: {_flow(capture)}"]
    back = _of_noun(listing, noun, (*_WRITES, *_CHANGES), writes=True) if verb not in _MOVES else tool
    if back is None:
        return []
    put_back = _write_back(back, capture)
    lines.append("# REVIEW: every $before path below is a guess at what the read answers: confirm with a drill")
    if verb in _WRITES:
        delete = _of_noun(listing, noun, _DELETES, writes=True)
        lines += ["compensation:", "  - name: overwritten", "    when: {\"$before\": {$exists: true}}",
                  *(f"  {line}" for line in put_back)]
        if delete is not None:
            lines += ["  - name: created", f"    tool: {_text(delete.name)}",
                      f"    args: {_flow(_read_args(delete, inputs) or {})}", "    kind: inverse"]
        return lines
    return [*lines, "compensation:", *put_back]


def _read_args(read: ListedTool, inputs: JSONObjectView) -> dict[str, str] | None:
    """Arguments for `read` (or a delete) from the call's own: the same name, else the one identifying
    argument each has (`identifier` for `title`); None when a required one cannot be filled."""
    required, _, _ = arguments_fit(read.input_schema, [])
    own = [name for name in _IDENTIFYING if name in inputs]
    args: dict[str, str] = {}
    for name in required:
        if name in inputs:
            args[name] = f"$args.{name}"
        elif name in _IDENTIFYING and own:
            args[name] = f"$args.{own[0]}"
        else:
            return None
    return args


def _write_back(back: ListedTool, read_args: Mapping[str, str]) -> list[str]:
    """The undo that writes back what the capture read: each required argument from `$before`, but those
    the read was asked with."""
    required, _, _ = arguments_fit(back.input_schema, [])
    moves_to = [name for name in _properties(back.input_schema) if _verb(back) in _MOVES and name not in required
                and any(part in name for part in ("destination", "dest", "target", "new"))][:1]
    args = {name: read_args.get(name, f"$before.{name}") for name in [*required, *moves_to]}
    return [f"  tool: {_text(back.name)}", f"  args: {_flow(args)}", "  kind: inverse"]


def _flow(args: Mapping[str, str]) -> str:
    return "{" + ", ".join(f"{_text(k)}: {json.dumps(v)}" for k, v in args.items()) + "}"


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


def _guess(name: str, wanted: JSONView, inputs: Mapping[str, LooseJSON],
           outputs: Mapping[str, LooseJSON]) -> tuple[str | None, str]:
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


def _properties(schema: JSONObjectView) -> Mapping[str, LooseJSON]:
    """A JSON schema's `properties`, each a schema (an upstream's: read where used)."""
    found = schema.get("properties")
    return found if isinstance(found, Mapping) else {}


def _is_list(schema: JSONView) -> bool:
    kind = schema.get("type") if isinstance(schema, Mapping) else None
    return kind == "array" or (isinstance(kind, list) and "array" in kind)


def _text(value: str) -> str:
    """A YAML scalar for `value`: plain when that reads back as the same string, else JSON-quoted."""
    if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.\-]*", value) and value.lower() not in _YAML_WORDS:
        return value
    return json.dumps(value, ensure_ascii=False)


_YAML_WORDS = frozenset({"true", "false", "yes", "no", "on", "off", "null", "y", "n", "~"})
