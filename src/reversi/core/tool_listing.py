"""A server's tools as its `tools/list` answer gives them, and what their JSON schemas allow. Pure.

Schemas are read leniently: what this module cannot judge (a `$ref` outside the schema, a keyword
it does not know) counts as allowed, so a check built on it reports only what is certainly wrong
(`IMPOSSIBLE`) or not declared (`UNDECLARED`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum

from reversi.core.json_values import JSONObjectView, LooseJSON
from reversi.errors import BadInput

__all__ = ["Fit", "ListedTool", "Listing", "arguments_fit", "parse_listing", "path_fit"]

PathStep = str | int | None  # a key, an index, or None for `[*]`
Schema = Mapping[str, LooseJSON]  # a JSON schema as a server listed it: every part of it checked where read
_MAX_DEPTH = 64  # `$ref` cycles end here


@dataclass(frozen=True)
class ListedTool:
    """One tool as the server lists it.

    Attributes:
        read_only_hint: The `readOnlyHint` annotation; None when the server says nothing (which the
            protocol reads as "it may write").
    """

    name: str
    input_schema: Schema = field(default_factory=dict)
    output_schema: Schema | None = None
    read_only_hint: bool | None = None
    destructive_hint: bool | None = None
    idempotent_hint: bool | None = None
    annotations: Schema = field(default_factory=dict)  # as listed, the hints above included

    @property
    def writes(self) -> bool:
        """Whether the tool may change anything: all but those the server marks read-only."""
        return self.read_only_hint is not True


@dataclass(frozen=True)
class Listing:
    """A server's tools, and who the server said it is (empty when unknown)."""

    tools: tuple[ListedTool, ...]
    server: str = ""
    version: str = ""

    def get(self, name: str) -> ListedTool | None:
        return next((tool for tool in self.tools if tool.name == name), None)

    def describe(self) -> str:
        """`memory-server 0.6.3 (9 tools)`, or `9 tools` for a server that did not say who it is."""
        count = f"{len(self.tools)} tool{'s' if len(self.tools) != 1 else ''}"
        who = " ".join(part for part in (self.server, self.version) if part)
        return f"{who} ({count})" if who else count


def parse_listing(value: LooseJSON, source: str, server: str = "", version: str = "") -> Listing:
    """A listing from a `tools/list` result (`{"tools": [...]}`), or a whole JSON-RPC answer holding one.

    A recorded listing may say which server it came from in `_meta`, as
    `{"reversi/server": {"name": ..., "version": ...}}`; `server` and `version` win over it.

    Raises:
        BadInput: the value is not a tools/list result; the message names `source`.
    """
    if isinstance(value, Mapping) and isinstance(value.get("result"), Mapping):
        value = value["result"]
    tools = value.get("tools") if isinstance(value, Mapping) else None
    if not isinstance(tools, list):
        raise BadInput(f'{source}: expected a tools/list result, {{"tools": [...]}}')
    meta = _mapping(value.get("_meta"))
    said = _mapping(meta.get("reversi/server"))
    listed = tuple(_tool(item, f"{source}: tools[{index}]") for index, item in enumerate(tools))
    return Listing(listed, server or str(said.get("name") or ""), version or str(said.get("version") or ""))


def _tool(item: LooseJSON, where: str) -> ListedTool:
    if not isinstance(item, Mapping) or not isinstance(item.get("name"), str) or not item["name"]:
        raise BadInput(f"{where}: expected a tool with a name")
    schema = item.get("inputSchema", {})
    output = item.get("outputSchema")
    if not isinstance(schema, Mapping) or not (output is None or isinstance(output, Mapping)):
        raise BadInput(f"{where} ({item['name']}): inputSchema and outputSchema must be JSON objects")
    notes = _mapping(item.get("annotations"))

    def hint(name: str) -> bool | None:
        value = notes.get(name)
        return value if isinstance(value, bool) else None

    return ListedTool(
        item["name"], schema, output, hint("readOnlyHint"), hint("destructiveHint"), hint("idempotentHint"), notes
    )


_CHOICES = ("anyOf", "oneOf", "allOf")  # a schema that is a choice of schemas


class Fit(Enum):
    """What a schema says of a path into the values it describes."""

    FITS = "fits"
    UNDECLARED = "undeclared"  # a key the schema does not list, though it allows others
    IMPOSSIBLE = "impossible"


def path_fit(schema: Schema, path: Sequence[PathStep]) -> tuple[Fit, str]:
    """Whether a value the schema describes can have something at `path`, and if not, why not
    (`"no key \\"x\\""`, `"entities[*] is a string"`).

    A path through `anyOf`/`oneOf`/`allOf` fits when it fits one branch.
    """
    return _walk(schema, schema, tuple(path), "", 0)


def _walk(node: LooseJSON, root: Schema, path: tuple[PathStep, ...], at: str, depth: int) -> tuple[Fit, str]:
    node = _resolved(node, root, depth)
    if not path or not isinstance(node, Mapping) or depth > _MAX_DEPTH:
        return Fit.FITS, ""  # the end of the path, or a schema that allows anything (`true`, `{}`)
    branches = [b for key in _CHOICES for b in node.get(key) or () if isinstance(b, Mapping)]
    if branches:
        found = [_walk({**node, **branch, "anyOf": (), "oneOf": (), "allOf": ()}, root, path, at, depth + 1)
                 for branch in branches]
        return min(found, key=lambda fit: list(Fit).index(fit[0]))
    step, rest = path[0], path[1:]
    if isinstance(step, str):
        return _key(node, root, step, rest, at, depth)
    here = f"{at}[{'*' if step is None else step}]"
    if not _may_be(node, "array"):
        return Fit.IMPOSSIBLE, f"{at or 'the value'} is {_kind(node)}, not a list"
    items = node.get("items", node.get("prefixItems"))
    if isinstance(items, list):
        items = items[step] if isinstance(step, int) and step < len(items) else {}
    return _walk(items, root, rest, here, depth + 1)


def _key(node: Schema, root: Schema, key: str, rest: tuple[PathStep, ...], at: str,
         depth: int) -> tuple[Fit, str]:
    here = f"{at}.{key}" if at else key
    if not _may_be(node, "object"):
        return Fit.IMPOSSIBLE, f"{at or 'the value'} is {_kind(node)}, not an object"
    properties = _mapping(node.get("properties"))
    if key in properties:
        return _walk(properties[key], root, rest, here, depth + 1)
    extra = node.get("additionalProperties")
    where = f" in {at}" if at else ""
    if extra is False:
        return Fit.IMPOSSIBLE, f'no key "{key}"{where}'
    if isinstance(extra, Mapping):
        return _walk(extra, root, rest, here, depth + 1)
    if properties or node.get("patternProperties"):
        return Fit.UNDECLARED, f'no key "{key}" declared{where}'
    return Fit.FITS, ""


def optional_in(schema: Schema, path: Sequence[PathStep]) -> str | None:
    """The first key along `path` that the schema declares but does not require (so a value may lack
    it), or None. Only plain object schemas are judged: through a list, or a choice of schemas, None."""
    node: LooseJSON = schema
    for step in path:
        node = _resolved(node, schema, 0)
        if not isinstance(step, str) or not isinstance(node, Mapping) or any(k in node for k in _CHOICES):
            return None
        properties = _mapping(node.get("properties"))
        if step not in properties:
            return None
        if step not in (node.get("required") or ()):
            return step
        node = properties[step]
    return None



def arguments_fit(schema: Schema, keys: Sequence[str]) -> tuple[list[str], list[str], bool]:
    """How a mapping with `keys` fits an object schema: the required keys it lacks, the keys the
    schema does not declare, and whether the schema forbids undeclared keys."""
    node = _resolved(schema, schema, 0)
    if not isinstance(node, Mapping):
        return [], [], False
    required = [key for key in node.get("required") or () if isinstance(key, str)]
    properties = _mapping(node.get("properties"))
    missing = [key for key in required if key not in keys]
    declared = bool(properties) or node.get("additionalProperties") is False
    unknown = [key for key in keys if key not in properties] if declared else []
    return missing, unknown, node.get("additionalProperties") is False


def _resolved(node: LooseJSON, root: Schema, depth: int) -> LooseJSON:
    """The schema a local `$ref` (`#/$defs/X`, `#/definitions/X`) points at; anything else as it is."""
    while isinstance(node, Mapping) and isinstance(node.get("$ref"), str) and depth <= _MAX_DEPTH:
        ref = node["$ref"]
        if not ref.startswith("#"):
            return {}
        target: LooseJSON = root
        for part in (p.replace("~1", "/").replace("~0", "~") for p in ref[1:].split("/") if p):
            target = target.get(part) if isinstance(target, Mapping) else None
        node = target if target is not None else {}
        depth += 1
    return node


def _mapping(value: LooseJSON) -> Schema:
    return value if isinstance(value, Mapping) else {}


def _types(node: JSONObjectView) -> set[str] | None:
    kind = node.get("type")
    if isinstance(kind, str):
        return {kind}
    if isinstance(kind, list):
        return {str(k) for k in kind}
    return None


def _may_be(node: JSONObjectView, kind: str) -> bool:
    types = _types(node)
    return types is None or kind in types


def _kind(node: JSONObjectView) -> str:
    types = sorted(_types(node) or ())
    words = {"string": "a string", "integer": "an integer", "number": "a number", "boolean": "a boolean",
             "null": "null", "array": "a list", "object": "an object"}
    return " or ".join(words.get(t, t) for t in types) or "anything"
