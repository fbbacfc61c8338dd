"""Reading PyYAML's composed nodes as JSON values, strictly. Pure: no I/O.

Manifests are read from the node tree rather than the constructed objects, so every problem carries
the line of the key or value at fault, and YAML 1.1 surprises (`yes` as a boolean) stay text.
"""

from __future__ import annotations

from typing import TypeGuard

from yaml.constructor import SafeConstructor
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from reversi.core.json_values import JSON, JSONObject, quoted

NULL = "tag:yaml.org,2002:null"
BOOL = "tag:yaml.org,2002:bool"
INT = "tag:yaml.org,2002:int"
FLOAT = "tag:yaml.org,2002:float"
STR = "tag:yaml.org,2002:str"
_SCALARS = SafeConstructor()


def scalar(node: ScalarNode) -> JSON:
    """A scalar as JSON; YAML 1.1 booleans other than true/false stay text, and so do dates."""
    text: str = node.value  # PyYAML's stubs leave a node's value, and what it builds of it, untyped
    number: int | float
    tag = node.tag
    if tag == NULL:
        return None
    if tag == BOOL:
        return text.lower() == "true" if text.lower() in ("true", "false") else text
    try:
        if tag == INT:
            number = _SCALARS.construct_yaml_int(node)
            return number
        if tag == FLOAT:
            number = _SCALARS.construct_yaml_float(node)
            return number
    except (ValueError, IndexError):  # `!!int abc`: a tag the text does not fit; it stays text
        return text
    return text


def plain(node: Node) -> JSON:
    """A node as JSON (the first of duplicate keys kept; the reader reports the others)."""
    if isinstance(node, ScalarNode):
        return scalar(node)
    if isinstance(node, SequenceNode):
        return [plain(item) for item in node.value]
    value: JSONObject = {}
    for key, item in node.value:
        if isinstance(key, ScalarNode) and key.value not in value:
            value[key.value] = plain(item)
    return value


def is_null(node: Node) -> bool:
    return isinstance(node, ScalarNode) and node.tag == NULL


def is_bool(node: Node) -> TypeGuard[ScalarNode]:
    """Whether the node is `true` or `false` (not `yes`, `on` and the like)."""
    return isinstance(node, ScalarNode) and node.tag == BOOL and node.value.lower() in ("true", "false")


_DESCRIBED = 80


def describe(node: Node) -> str:
    """A node as messages name it: "a list", "a mapping", or the scalar quoted."""
    if isinstance(node, SequenceNode):
        return "a list"
    if isinstance(node, MappingNode):
        return "a mapping"
    if not isinstance(node, ScalarNode):
        return "?"
    text = quoted(scalar(node))  # cut short: a file that is not a manifest at all is one long scalar
    return text if len(text) <= _DESCRIBED else f"{text[:_DESCRIBED - 4]}...\" ({len(node.value)} characters)"
