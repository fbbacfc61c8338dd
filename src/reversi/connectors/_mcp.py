"""`reversi-connectors serve`: the connectors' tools as an MCP server (the SDK's low-level `Server`).

A tool's error is an `isError` result with the one-line message, as an MCP client expects from a
tool that ran and failed; a compensation reads its idempotency key from the call's `_meta`
(`reversi/idempotency_key`, as the gateway's operator rollback sends it).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import Any

import anyio
from mcp import types
from mcp.server import Server, ServerRequestContext

from reversi.connectors._base import Connector, Tool, ToolKind
from reversi.connectors._errors import one_line
from reversi.errors import UnknownTool

__all__ = ["IDEMPOTENCY_META_KEY", "ToolServer", "serve_http", "serve_stdio"]

IDEMPOTENCY_META_KEY = "reversi/idempotency_key"


def _annotations(tool: Tool) -> types.ToolAnnotations:
    read = tool.kind is ToolKind.READ
    return types.ToolAnnotations(
        read_only_hint=read,
        destructive_hint=False if read else tool.destructive,
        idempotent_hint=True if read else tool.idempotent,
        open_world_hint=False,
    )


def _text(text: str, *, error: bool) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=text)], is_error=error)


class ToolServer:
    """The tools of some connectors, listed and called over MCP."""

    def __init__(self, connectors: Sequence[Connector]) -> None:
        self.tools = {tool.name: tool for connector in connectors for tool in connector.tools}
        self._listed = [
            types.Tool(name=tool.name, description=tool.description, input_schema=tool.input_schema(),
                       annotations=_annotations(tool))
            for tool in self.tools.values()
        ]

    async def list_tools(self, ctx: ServerRequestContext[Any, Any], params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=self._listed)

    async def call_tool(
        self, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        tool = self.tools.get(params.name)
        if tool is None:
            return _text(UnknownTool(params.name).message, error=True)
        key = (params.meta or {}).get(IDEMPOTENCY_META_KEY)
        try:
            result = await anyio.to_thread.run_sync(
                lambda: tool.invoke(params.arguments or {}, idempotency_key=key if isinstance(key, str) else None)
            )
        except Exception as exc:  # any failure is the tool's error (isError), not the server's
            return _text(one_line(exc), error=True)
        structured = result if isinstance(result, dict) else {"result": result}
        return types.CallToolResult(content=[types.TextContent(text=json.dumps(result))],
                                    structured_content=structured)

    def input_schema(self, name: str) -> dict[str, Any] | None:
        tool = self.tools.get(name)
        return tool.input_schema() if tool is not None else None

    def server(self) -> Server[Any]:
        from importlib.metadata import version

        return Server(
            "reversi-connectors",
            version=version("reversi"),
            instructions="Reversible tools: each forward result names what its compensation needs.",
            on_list_tools=self.list_tools,
            on_call_tool=self.call_tool,
            get_tool_input_schema=self.input_schema,
        )


async def serve_stdio(connectors: Sequence[Connector]) -> None:
    """Serve on stdin/stdout until the client hangs up."""
    from mcp.server.stdio import stdio_server

    server = ToolServer(connectors).server()
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


def serve_http(connectors: Sequence[Connector], host: str, port: int) -> None:
    """Serve streamable HTTP at `/mcp` until interrupted."""
    import uvicorn

    app = ToolServer(connectors).server().streamable_http_app(stateless_http=True, json_response=True, host=host)
    print(f"reversi-connectors: serving MCP at http://{host}:{port}/mcp", file=sys.stderr, flush=True)
    uvicorn.run(app, host=host, port=port, log_level="warning")
