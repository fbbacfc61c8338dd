"""A manifest's text with every tool name it holds prefixed, for a gateway with several upstreams
(which names upstream NAME's tool `t` as `NAME.t`). Pure: no I/O.

Only the names are rewritten, in place (tool keys, the `tool` of each compensation, alternative, call
of `then`, verification and capture, and `requires` globs); comments and layout stay as they were. A
name written once and used again through a YAML alias is rewritten once.
"""

from __future__ import annotations

import json
import re

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from reversi.core.upstream_names import UPSTREAM_NAME_RULE, is_upstream_name
from reversi.errors import BadInput

__all__ = ["prefixed"]

_PLAIN = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-/]*")


def prefixed(text: str, name: str) -> str:
    """`text` (a manifest) with each tool name `t` written as `NAME.t`.

    Raises:
        BadInput: `name` is not an upstream's name (as the gateway takes them), or `text` is not a
            manifest's YAML.
    """
    if not is_upstream_name(name):
        raise BadInput(f"a prefix is an upstream's name ({UPSTREAM_NAME_RULE}), not {name!r}")
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as error:
        raise BadInput(f"not a manifest: {error}") from None
    unique = {id(node): node for node in _names(root)}.values()
    spans = sorted(unique, key=lambda node: node.start_mark.index, reverse=True)
    for node in spans:
        start, end = node.start_mark.index, node.end_mark.index
        text = text[:start] + _written(f"{name}.{node.value}", node) + text[end:]
    return text


def _names(root: Node | None) -> list[ScalarNode]:
    tools = _get(root, "tools")
    if not isinstance(tools, MappingNode):
        return []
    found: list[ScalarNode] = []
    for key, entry in tools.value:
        if isinstance(key, ScalarNode):
            found.append(key)
        found += [tool for call in _calls(entry) if isinstance(tool := _get(call, "tool"), ScalarNode)]
        requires = _get(entry, "requires")
        if isinstance(requires, SequenceNode):
            found += [item for item in requires.value if isinstance(item, ScalarNode)]
    return found


def _calls(entry: Node) -> list[Node | None]:
    """The mappings of an entry that name a tool: its capture, verification, probe, follow-up action and
    compensation (each alternative, each call of its `then`, and its own verification)."""
    compensation = _get(entry, "compensation")
    alternatives = compensation.value if isinstance(compensation, SequenceNode) else [compensation]
    calls = [_get(entry, "capture"), _get(entry, "verification"), _get(entry, "probe"),
             _get(_get(entry, "follow_up"), "action")]
    for alternative in alternatives:
        then = _get(alternative, "then")
        calls += [alternative, _get(alternative, "verification")]
        calls += then.value if isinstance(then, SequenceNode) else []
    return calls


def _get(node: Node | None, key: str) -> Node | None:
    if not isinstance(node, MappingNode):
        return None
    return next((value for k, value in node.value if isinstance(k, ScalarNode) and k.value == key), None)


def _written(value: str, like: ScalarNode) -> str:
    """The scalar as YAML: plain where it was and can stay so, else a double-quoted (JSON) string."""
    return value if like.style is None and _PLAIN.fullmatch(value) else json.dumps(value, ensure_ascii=False)
