"""`reversi-connectors serve`: the connectors' tools as an MCP server (the SDK's low-level `Server`).

A tool's error is an `isError` result with the one-line message, as an MCP client expects from a
tool that ran and failed; a compensation reads its idempotency key from the call's `_meta`
(`reversi/idempotency_key`, as the gateway's operator rollback sends it).

Over HTTP every request must carry `Authorization: Bearer TOKEN`, the token being
`REVERSI_CONNECTORS_TOKEN` (at least 32 characters; the server does not start without it): anything
else is answered 401 before its body is read, and no tool runs. The gateway sends it for an HTTP
upstream configured with `token_env: REVERSI_CONNECTORS_TOKEN`.
"""

from __future__ import annotations

import hmac
import json
import os
import sys
from collections.abc import Mapping, Sequence
from contextlib import nullcontext
from typing import Any, cast

import anyio
from mcp import types
from mcp.server import Server, ServerRequestContext
from pydantic import ConfigDict
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from reversi.connectors._base import Connector, Setting, Tool, ToolKind
from reversi.connectors._errors import one_line
from reversi.core.calls import (
    CALL_META_KEY,
    COMPENSATION_META_KEY,
    CONNECTORS_SERVER,
    IDEMPOTENCY_META_KEY,
    CallId,
    making,
)
from reversi.core.json_values import JSONObject, LooseJSON, LooseJSONObject
from reversi.core.manifest_yaml import parse_manifest
from reversi.core.server_undo import PAIR, RECOVERY, recovery_annotation
from reversi.core.upstream_names import is_upstream_name
from reversi.distribution import version
from reversi.errors import ConfigError, UnknownTool
from reversi.mcp_results import exact_results, passed_through

__all__ = ["IDEMPOTENCY_META_KEY", "TOKEN", "ToolServer", "serve_http", "serve_stdio", "serving_token"]

TOKEN = Setting("REVERSI_CONNECTORS_TOKEN", "the bearer token every request to `serve --http` must carry",
                "none: serve --http does not start without it")
_MIN_TOKEN = 32


class _Annotations(types.ToolAnnotations):
    """The SDK's annotations, with the undo a tool declares (`recovery`, `x-compensation-pair`) beside them."""

    model_config = ConfigDict(**types.ToolAnnotations.model_config, extra="allow")


def _annotations(tool: Tool, recovery: LooseJSONObject | None) -> types.ToolAnnotations:
    read = tool.kind is ToolKind.READ
    undo = {} if recovery is None else {
        RECOVERY: recovery, PAIR: recovery["compensatingOperation"]["operationId"]}
    return _Annotations(
        read_only_hint=read,
        destructive_hint=False if read else tool.destructive,
        idempotent_hint=True if read else tool.idempotent,
        open_world_hint=False,
        **undo,
    )


def _recoveries(connectors: Sequence[Connector], tools: Mapping[str, Tool]) -> dict[str, LooseJSONObject]:
    """The undo each forward tool declares in its listing, from its connector's manifest (SEP-3172's
    `recovery`), where the proposal can say it."""
    found: dict[str, LooseJSONObject] = {}
    for connector in connectors:
        entries, _ = parse_manifest(connector.manifest_text(), connector.name)
        for entry in entries:
            undo = tools.get(entry.compensations[0].tool) if entry.compensations else None
            required = undo.input_schema()["required"] if undo is not None else None
            recovery = recovery_annotation(entry, required) if required is not None else None
            if recovery is not None and entry.pattern in tools:
                found[entry.pattern] = recovery
    return found


def _journaled_name(value: LooseJSON, tool: str) -> str | None:
    """The compensation's name as the run journaled it (`_meta` `reversi/compensation`), if the gateway
    said one that names this tool: the tool itself, or it under an upstream's prefix (`NAME.tool`)."""
    if not isinstance(value, str):
        return None
    prefix, _, rest = value.partition(".")
    return value if value == tool or (rest == tool and is_upstream_name(prefix)) else None


def _text(text: str, *, error: bool) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=text)], is_error=error)


class ToolServer:
    """The tools of some connectors, listed and called over MCP."""

    def __init__(self, connectors: Sequence[Connector]) -> None:
        self.tools = {tool.name: tool for connector in connectors for tool in connector.tools}
        recoveries = _recoveries(connectors, self.tools)
        listed = [
            types.Tool(name=tool.name, description=tool.description, input_schema=tool.input_schema(),
                       annotations=_annotations(tool, recoveries.get(tool.name)))
            for tool in self.tools.values()
        ]
        # As JSON, passed through as it is (`exact_results`): the SDK's models and its per-revision sieve
        # would drop the annotations they do not name.
        self._listed = types.ListToolsResult(tools=listed).model_dump(by_alias=True, mode="json", exclude_none=True,
                                                                     serialize_as_any=True)

    async def list_tools(self, ctx: ServerRequestContext[Any, Any], params: Any) -> types.ListToolsResult:
        return cast(types.ListToolsResult, passed_through("tools/list", self._listed))

    async def call_tool(
        self, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        tool = self.tools.get(params.name)
        if tool is None:
            return _text(UnknownTool(params.name).message, error=True)
        meta = params.meta or {}
        key = meta.get(IDEMPOTENCY_META_KEY)
        made_as = CallId.of(meta.get(CALL_META_KEY))
        journaled_as = _journaled_name(meta.get(COMPENSATION_META_KEY), tool.name)

        def run() -> Any:
            with making(made_as.run_id, made_as.step) if made_as else nullcontext():
                return tool.invoke(params.arguments or {}, idempotency_key=key if isinstance(key, str) else None,
                                   journaled_as=journaled_as)

        try:
            result = await anyio.to_thread.run_sync(run)
        except Exception as exc:  # any failure is the tool's error (isError), not the server's
            return _text(one_line(exc), error=True)
        structured = result if isinstance(result, dict) else {"result": result}
        return types.CallToolResult(content=[types.TextContent(text=json.dumps(result))],
                                    structured_content=structured)

    def input_schema(self, name: str) -> JSONObject | None:
        tool = self.tools.get(name)
        return tool.input_schema() if tool is not None else None

    def server(self) -> Server[Any]:
        server: Server[Any] = Server(
            CONNECTORS_SERVER,
            version=version(),
            instructions="Reversible tools: each forward result names what its compensation needs.",
            on_list_tools=self.list_tools,
            on_call_tool=self.call_tool,
            get_tool_input_schema=self.input_schema,
        )
        server.middleware = [exact_results(lambda: server.server_info_stamp)]
        return server


async def serve_stdio(connectors: Sequence[Connector]) -> None:
    """Serve on stdin/stdout until the client hangs up."""
    from mcp.server.stdio import stdio_server

    server = ToolServer(connectors).server()
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


def serving_token() -> str:
    """The bearer token `serve --http` requires, from `REVERSI_CONNECTORS_TOKEN`.

    Raises:
        ConfigError: it is not set, or shorter than 32 characters.
    """
    token = os.environ.get(TOKEN.name, "")
    if not token:
        raise ConfigError(f"{TOKEN.name} is not set: serve --http answers only requests that carry it as a bearer"
                          f" token (make one with: openssl rand -hex 32)")
    if len(token) < _MIN_TOKEN:
        raise ConfigError(f"{TOKEN.name} must be at least {_MIN_TOKEN} characters long")
    return token


class BearerOnly:
    """ASGI middleware: an HTTP request without `Authorization: Bearer TOKEN` is answered 401, unread."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self._expected = f"Bearer {token}".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "lifespan":
            given = next((value for name, value in scope["headers"] if name == b"authorization"), b"")
            if not hmac.compare_digest(given, self._expected):
                await self._refuse(scope, receive, send)
                return
        await self.app(scope, receive, send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket":  # closed before it is accepted: the client sees 403
            await send({"type": "websocket.close", "code": 1008})
            return
        refused = JSONResponse({"error": f"unauthorized: send Authorization: Bearer with {TOKEN.name}"}, 401,
                               headers={"WWW-Authenticate": 'Bearer realm="reversi-connectors"'})
        await refused(scope, receive, send)


def serve_http(connectors: Sequence[Connector], host: str, port: int, token: str) -> None:
    """Serve streamable HTTP at `/mcp`, to requests that carry `token`, until interrupted."""
    import uvicorn

    app = ToolServer(connectors).server().streamable_http_app(stateless_http=True, json_response=True, host=host)
    print(f"reversi-connectors: serving MCP at http://{host}:{port}/mcp", file=sys.stderr, flush=True)
    uvicorn.run(BearerOnly(app, token), host=host, port=port, log_level="warning")
