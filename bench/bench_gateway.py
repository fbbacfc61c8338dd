"""Gateway overhead: sequential tools/call from the official MCP client to an upstream directly, and the
same calls through `reversi-gateway` (stdio, journaling each call durably in a SQLite file).

A third side is a bare proxy with no journal, built the way the gateway is (the SDK's low-level
server on the gateway's stdio transport, the SDK's client to the upstream): what the second MCP hop
costs on its own, so the gateway's ratio splits into the hop and the journal.

Every side talks to the same small upstream (its own process each), in the same run; batches of the
sides alternate so drift hits them alike. Target: gateway median <= 1.8 x direct; p99 reported.

    python bench/bench_gateway.py [--quick] [--calls N]
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a file: make `bench` importable, and not bench/ itself
    sys.path[0] = str(Path(__file__).resolve().parent.parent)

import argparse
import os
import shlex
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio

from bench.common import ROOT, Result, median, ms, note, percentile, print_table, temp_dir

MEDIAN_TARGET = 1.8
TOOL = "inventory.reserve"
MANIFEST = """\
version: 1
tools:
  inventory.reserve:
    compensation:
      tool: inventory.release
      args: {reservation: "$result.id"}
"""


def serve_upstream() -> None:
    """The upstream both sides call: one tool answering a small structured result."""
    from mcp import types
    from mcp.server import Server
    from mcp.server.stdio import stdio_server

    tools = [
        types.Tool(
            name=TOOL,
            input_schema={"type": "object", "properties": {"sku": {"type": "string"}, "qty": {"type": "integer"}}},
        )
    ]

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        args = params.arguments or {}
        value = {"id": f"res_{args.get('qty', 0)}", "sku": args.get("sku"), "ok": True}
        return types.CallToolResult(content=[types.TextContent(text='{"ok": true}')], structured_content=value)

    server = Server("inventory", version="1.0", on_list_tools=list_tools, on_call_tool=call_tool)

    async def main() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(main)


def serve_bare_proxy() -> None:
    """The second hop alone: list the upstream's tools, forward each tools/call as it is, journal nothing."""
    from mcp import Client, StdioServerParameters, types
    from mcp.server import Server
    from pydantic import TypeAdapter

    from reversi.gateway.stdio import agent_stdio

    raw: Any = TypeAdapter(dict[str, Any])
    upstream_params = StdioServerParameters(command=sys.executable, args=[str(Path(__file__).resolve()),
                                                                          "--serve-upstream"])

    async def main() -> None:
        async with Client(upstream_params, cache=None) as upstream:
            tools = (await upstream.list_tools()).tools
            schemas = {tool.name: tool.input_schema for tool in tools}

            async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
                return types.ListToolsResult(tools=tools)

            async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> Any:
                forward = types.CallToolRequestParams(name=params.name, arguments=params.arguments)
                return await upstream.session.send_request(types.CallToolRequest(params=forward), raw)

            server = Server("bare-proxy", on_list_tools=list_tools, on_call_tool=call_tool,
                            get_tool_input_schema=schemas.get)
            server.middleware = []
            async with agent_stdio() as (read, write):
                await server.run(read, write, server.create_initialization_options())

    anyio.run(main, backend_options={"use_uvloop": True})


async def _timed(call: Callable[[int], Awaitable[Any]], start: int, count: int) -> list[float]:
    samples = []
    clock = time.perf_counter
    for i in range(start, start + count):
        t0 = clock()
        await call(i)
        samples.append(clock() - t0)
    return samples


SIDES = ("direct", "bare proxy", "gateway")


async def measure(calls: int, batch: int, warmup: int, directory: Path) -> dict[str, list[float]]:
    from mcp import Client, StdioServerParameters

    upstream = [sys.executable, str(Path(__file__).resolve()), "--serve-upstream"]
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    manifest = directory / "tools.yaml"
    manifest.write_text(MANIFEST)
    gateway_args = [
        "-m", "reversi.gateway",
        "--upstream", f"inventory={shlex.join(upstream)}",
        "--db", f"sqlite:///{directory}/reversi.db",
        "-m", str(manifest),
    ]
    direct_params = StdioServerParameters(command=upstream[0], args=upstream[1:], env=env)
    bare_params = StdioServerParameters(command=upstream[0], args=[upstream[1], "--serve-bare-proxy"], env=env)
    gateway_params = StdioServerParameters(command=sys.executable, args=gateway_args, env=env, cwd=str(directory))
    async with (
        Client(direct_params, cache=None) as direct,
        Client(bare_params, cache=None) as bare,
        Client(gateway_params, cache=None) as gateway,
    ):
        def caller(client: Client) -> Callable[[int], Awaitable[Any]]:
            async def call(i: int) -> Any:
                result = await client.call_tool(TOOL, {"sku": "sku-4711", "qty": i % 7 + 1})
                assert not result.is_error, result
                return result

            return call

        sides = {"direct": caller(direct), "bare proxy": caller(bare), "gateway": caller(gateway)}
        for call in sides.values():
            await _timed(call, 0, warmup)
        samples: dict[str, list[float]] = {side: [] for side in SIDES}
        for r in range(calls // batch):
            for side in SIDES if r % 2 == 0 else SIDES[::-1]:
                samples[side] += await _timed(sides[side], warmup + r * batch, batch)
    note(f"gateway: {calls} calls each side in alternating batches of {batch} (after {warmup} warm-up calls)")
    return samples


def bench(quick: bool = False, calls: int | None = None) -> list[Result]:
    count = calls or (200 if quick else 1000)
    with temp_dir("gateway") as directory:
        samples = anyio.run(measure, count, 100 if count >= 100 else count, 20 if quick else 50, directory)
    direct, bare, gateway = (samples[side] for side in SIDES)
    ratio = median(gateway) / median(direct)
    return [
        Result(
            "gateway",
            f"tools/call median, stdio, durable journal ({count} calls)",
            ms(median(gateway)),
            ms(median(direct)),
            ratio,
            f"<= {MEDIAN_TARGET}x",
            ratio <= MEDIAN_TARGET,
        ),
        Result(
            "gateway",
            "tools/call p99",
            ms(percentile(gateway, 0.99)),
            ms(percentile(direct, 0.99)),
            percentile(gateway, 0.99) / percentile(direct, 0.99),
        ),
        Result("gateway", "overhead per call (median difference)", ms(median(gateway) - median(direct))),
        Result("gateway", "bare proxy, no journal: the second hop alone", ms(median(bare)), ms(median(direct)),
               median(bare) / median(direct)),
        Result("gateway", "what the journal adds (gateway - bare proxy)", ms(median(gateway) - median(bare))),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer calls, for a smoke test")
    parser.add_argument("--calls", type=int, help="calls per side (default 1000)")
    parser.add_argument("--serve-upstream", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--serve-bare-proxy", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve_upstream:
        serve_upstream()
        return 0
    if args.serve_bare_proxy:
        serve_bare_proxy()
        return 0
    print_table(bench(args.quick, args.calls))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
