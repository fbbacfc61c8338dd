"""Which connector offers a tool: dispatch on the tool name's prefix (`fs.`, `sql.`, ...).

Connector modules are imported on first use, so asking for `fs` never loads an HTTP client.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable

from reversi.connectors._base import Connector, Tool, ToolKind
from reversi.errors import BadArgument, UnknownTool

__all__ = ["NAMES", "connector", "connectors", "find_tool"]

NAMES = ("fs", "sql", "http", "stripe", "github", "slack")


def connector(name: str) -> Connector:
    """The connector called `name`.

    Raises:
        BadArgument: there is none (`bad argument connector: unknown connector NAME (known: ...)`).
    """
    if name not in NAMES:
        raise BadArgument("connector", f"unknown connector {name!r} (known: {', '.join(NAMES)})")
    module = importlib.import_module(f"reversi.connectors.{name}")
    found: Connector = module.load() if hasattr(module, "load") else module.CONNECTOR  # http: from its tools file
    return found


def connectors(names: Iterable[str] = ()) -> list[Connector]:
    """The connectors named (every one when none is), in the order asked."""
    return [connector(name) for name in (tuple(names) or NAMES)]


def find_tool(name: str, kind: ToolKind | None = None) -> Tool:
    """The tool called `name` (of that kind, when one is given).

    Raises:
        UnknownTool: no connector has the prefix, or it has no such tool of that kind.
    """
    prefix, dot, _ = name.partition(".")
    if not dot or prefix not in NAMES:
        raise UnknownTool(name)
    tool = connector(prefix).tool(name)
    if kind is not None and tool.kind is not kind:
        raise UnknownTool(f"{name} (it is a {tool.kind} tool, not a {kind} tool)")
    return tool
