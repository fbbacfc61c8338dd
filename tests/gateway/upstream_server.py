"""A small but real upstream MCP server for the gateway tests, on the official SDK's low-level Server.

    python upstream_server.py STATE_DIR [--http]       (stdio by default; --http prints its port on stdout)

Its effects live in STATE_DIR so a test can see them: `orders.json` (the shop), `calls.jsonl` (every
tools/call it received, with its arguments and `_meta`), `started-KEY` (written by `wait` with the
server's pid, so a test knows the call is in flight) and `release-KEY` (created by a test to let
`wait` answer), and over HTTP `headers.jsonl` (the headers of every request). `fail-cancel` holds
how many `cancel_order` calls fail before one succeeds. `extra-tools` (one name a line, written by a
test) adds tools while it runs; each answers its name.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio
from mcp import types
from mcp.server import Server, ServerRequestContext
from mcp.shared.exceptions import MCPError

STATE = Path(sys.argv[1])
NAME = os.environ.get("UPSTREAM_NAME", "shop")

_OBJ = {"type": "object"}
TOOLS = [
    types.Tool(
        name="create_order",
        description="Place an order.",
        input_schema={
            "type": "object",
            "properties": {"order_id": {"type": "string"}, "amount": {"type": "integer"}},
            "required": ["order_id"],
        },
        annotations=types.ToolAnnotations(title="Create order", destructive_hint=False, open_world_hint=True),
        _meta={"example/vendor": "kept"},
    ),
    types.Tool(
        name="cancel_order",
        input_schema={"type": "object", "properties": {"order_id": {"type": "string"}}},
        annotations=types.ToolAnnotations(destructive_hint=True, idempotent_hint=True),
    ),
    types.Tool(
        name="get_order",
        input_schema={"type": "object", "properties": {"order_id": {"type": "string"}}},
        output_schema={"type": "object", "properties": {"status": {"type": "string"}}},
        annotations=types.ToolAnnotations(read_only_hint=True),
    ),
    types.Tool(name="echo", input_schema={"type": "object", "properties": {"text": {"type": "string"}}}),
    types.Tool(name="fail", input_schema=_OBJ),
    types.Tool(name="rpc_error", input_schema=_OBJ),
    types.Tool(name="server_error", input_schema=_OBJ),
    types.Tool(name="wait", input_schema={"type": "object", "properties": {"key": {"type": "string"}}}),
    types.Tool(name="env", input_schema={"type": "object", "properties": {"name": {"type": "string"}}}),
    types.Tool(name="slow", input_schema={"type": "object", "properties": {"parts": {"type": "integer"}}}),
    types.Tool(name="ask", input_schema=_OBJ),
]


def _orders() -> dict[str, Any]:
    path = STATE / "orders.json"
    return json.loads(path.read_text()) if path.exists() else {}


def _save(orders: dict[str, Any]) -> None:
    (STATE / "orders.json").write_text(json.dumps(orders))


def _text(text: str, *, error: bool = False) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=text)], is_error=error)


def _structured(value: dict[str, Any]) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=json.dumps(value))], structured_content=value)


async def list_tools(ctx: ServerRequestContext, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
    return types.ListToolsResult(tools=TOOLS + [types.Tool(name=name, input_schema=_OBJ) for name in _extra_tools()])


def _extra_tools() -> list[str]:
    path = STATE / "extra-tools"
    return path.read_text().split() if path.exists() else []


async def call_tool(ctx: ServerRequestContext, params: types.CallToolRequestParams) -> types.CallToolResult:
    args = params.arguments or {}
    meta = {k: v for k, v in (params.meta or {}).items() if not k.startswith("io.modelcontextprotocol/")}
    with (STATE / "calls.jsonl").open("a") as log:
        log.write(json.dumps({"upstream": NAME, "tool": params.name, "arguments": args, "meta": meta}) + "\n")
    try:
        return await _call(ctx, params, args)
    except (KeyError, TypeError, AttributeError, ValueError) as exc:  # arguments a fuzzing agent got wrong
        raise MCPError(code=-32602, message=f"bad arguments for {params.name}: {exc!r}") from None


async def _call(ctx: ServerRequestContext, params: types.CallToolRequestParams, args: dict[str, Any]
                ) -> types.CallToolResult:
    orders = _orders()
    if params.name == "create_order":
        order = {"id": f"ord_{args['order_id']}", "amount": args.get("amount", 0), "status": "placed"}
        orders[args["order_id"]] = order
        _save(orders)
        return _structured(order)
    if params.name == "cancel_order":
        failures = STATE / "fail-cancel"
        if failures.exists() and int(failures.read_text() or 0) > 0:
            failures.write_text(str(int(failures.read_text()) - 1))
            return _text("the shop is busy, try again", error=True)
        orders[args["order_id"]]["status"] = "canceled"
        _save(orders)
        return _structured(orders[args["order_id"]])
    if params.name == "get_order":
        return _structured(orders.get(args.get("order_id", ""), {"status": "missing"}))
    if params.name == "ask":  # 2026-07-28 multi-round-trip: asks its client first, then answers what it said
        answer = (params.input_responses or {}).get("color")
        if answer is None:
            schema = {"type": "object", "properties": {"color": {"type": "string"}}}
            question = types.ElicitRequestFormParams(message="Which color?", requested_schema=schema)
            return types.InputRequiredResult(  # type: ignore[return-value]
                input_requests={"color": types.ElicitRequest(params=question)}, request_state="asked-once"
            )
        return _structured({"action": getattr(answer, "action", None), "state": params.request_state})
    other = _OTHER_TOOLS.get(params.name)
    if other is not None:
        return await other(ctx, args)
    if params.name in _extra_tools():
        return _text(f"{params.name} ran")
    raise MCPError(code=-32602, message=f"Unknown tool: {params.name}")


async def _echo(ctx: ServerRequestContext, args: dict[str, Any]) -> types.CallToolResult:
    return _text(args.get("text", ""))


async def _fail(ctx: ServerRequestContext, args: dict[str, Any]) -> types.CallToolResult:
    return _text("boom", error=True)


async def _rpc_error(ctx: ServerRequestContext, args: dict[str, Any]) -> types.CallToolResult:
    raise MCPError(code=-32042, message="teapot", data={"why": "short and stout"})


async def _server_error(ctx: ServerRequestContext, args: dict[str, Any]) -> types.CallToolResult:
    raise MCPError(code=-32000, message="quota exceeded")  # the first code JSON-RPC leaves to servers


async def _wait(ctx: ServerRequestContext, args: dict[str, Any]) -> types.CallToolResult:
    key = args["key"]
    (STATE / f"started-{key}").write_text(str(os.getpid()))
    while not (STATE / f"release-{key}").exists():
        await anyio.sleep(0.01)
    return _structured({"released": key})


async def _env(ctx: ServerRequestContext, args: dict[str, Any]) -> types.CallToolResult:
    return _structured({"value": os.environ.get(args["name"]), "cwd": os.getcwd()})


async def _slow(ctx: ServerRequestContext, args: dict[str, Any]) -> types.CallToolResult:
    """Reports progress (when the caller asked for it) before answering."""
    parts = int(args.get("parts", 3))
    for done in range(1, parts + 1):
        await ctx.session.report_progress(done, parts, f"part {done} of {parts}")
    return _structured({"parts": parts})


_OTHER_TOOLS = {"echo": _echo, "fail": _fail, "rpc_error": _rpc_error, "server_error": _server_error, "wait": _wait,
                "env": _env, "slow": _slow}


async def list_resources(ctx: ServerRequestContext, params: Any) -> types.ListResourcesResult:
    return types.ListResourcesResult(resources=[types.Resource(uri="memo://greeting", name="greeting")])


async def read_resource(ctx: ServerRequestContext, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
    content = types.TextResourceContents(uri=str(params.uri), text=f"hello from {NAME}")
    return types.ReadResourceResult(contents=[content])


async def list_prompts(ctx: ServerRequestContext, params: Any) -> types.ListPromptsResult:
    return types.ListPromptsResult(prompts=[types.Prompt(name="greet", arguments=[types.PromptArgument(name="who")])])


async def get_prompt(ctx: ServerRequestContext, params: types.GetPromptRequestParams) -> types.GetPromptResult:
    who = (params.arguments or {}).get("who", "you")
    message = types.PromptMessage(role="user", content=types.TextContent(text=f"greet {who}"))
    return types.GetPromptResult(messages=[message])


async def complete(ctx: ServerRequestContext, params: types.CompleteRequestParams) -> types.CompleteResult:
    names = [n for n in ("ada", "alan", "grace") if n.startswith(params.argument.value)]
    return types.CompleteResult(completion=types.Completion(values=names, total=len(names), has_more=False))


server = Server(
    NAME,
    version="1.2.3",
    title="The Shop",
    description="Orders, for tests.",
    website_url="https://shop.example.com",
    icons=[types.Icon(src="https://shop.example.com/icon.png", mime_type="image/png")],
    instructions="A shop for tests.",
    on_list_tools=list_tools,
    on_call_tool=call_tool,
    on_list_resources=list_resources,
    on_read_resource=read_resource,
    on_list_prompts=list_prompts,
    on_get_prompt=get_prompt,
    on_completion=complete,
)


async def main() -> None:
    if "--http" in sys.argv:
        import uvicorn

        app = server.streamable_http_app(json_response=True, host="127.0.0.1")

        async def logged(scope: Any, receive: Any, send: Any) -> None:
            if scope["type"] == "http":  # what the gateway sent along, for the security tests
                headers = [[k.decode("latin-1"), v.decode("latin-1")] for k, v in scope["headers"]]
                with (STATE / "headers.jsonl").open("a") as log:
                    log.write(json.dumps(headers) + "\n")
            await app(scope, receive, send)

        config = uvicorn.Server(uvicorn.Config(logged, host="127.0.0.1", port=0, log_level="warning"))
        async with anyio.create_task_group() as tg:
            tg.start_soon(config.serve)
            while not config.started:
                await anyio.sleep(0.01)
            print(config.servers[0].sockets[0].getsockname()[1], flush=True)
        return
    from mcp.server.stdio import stdio_server

    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    STATE.mkdir(parents=True, exist_ok=True)
    anyio.run(main)
