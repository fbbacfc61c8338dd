"""Ready-made connectors: forward tools that record what their undo needs, the compensations and
read-backs that undo and check them, and the manifests that tie the two together.

    from reversi.connectors import fs
    run.call("fs.write_file", {"path": "notes.txt", "content": "hi"}, fs.write_file)

`reversi-connectors` (`reversi.connectors._cli`) serves the same tools as a compensator, a reader
and an MCP server.
"""

from __future__ import annotations

from reversi.connectors._base import Connector, Param, Setting, Tool, ToolKind
from reversi.connectors._registry import NAMES, connector, connectors, find_tool
from reversi.errors import BadArgument, ChangedSince, ConnectorError, DownstreamError, UnknownTool, UntrustedResult

__all__ = [
    "NAMES",
    "BadArgument",
    "ChangedSince",
    "Connector",
    "ConnectorError",
    "DownstreamError",
    "Param",
    "Setting",
    "Tool",
    "ToolKind",
    "UnknownTool",
    "UntrustedResult",
    "connector",
    "connectors",
    "find_tool",
]
