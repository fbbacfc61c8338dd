"""Gateway overhead: sequential tools/call from the official MCP client to an upstream directly, and the
same calls through `reversi-gateway` (stdio, journaling each call durably in a SQLite file).

A third side is a bare proxy with no journal, built the way the gateway is (the SDK's low-level
server on the gateway's stdio transport, the SDK's client to the upstream): what the second MCP hop
costs on its own, so the gateway's ratio splits into the hop and the journal.

A fourth side is `run.call` on the same store with a function that does nothing: what journaling a
call costs the SDK, the floor of what the gateway's journal can add (gateway - bare proxy). Back to
back, its commits come faster than a gateway's, which wait out an upstream round trip between them,
and on a VM's disk an fsync after an idle spell costs more; so a fifth side (info) times `run.call`
after an untimed direct call each, at about a forwarded call's pace.

Every side talks to the same small upstream (its own process each), in the same run; batches of the
sides alternate so drift hits them alike (batches of 20, so that a swing of the disk's latency that
lasts a few seconds falls on every side). Two upstreams in turn: a Python one on the SDK (2026-07-28)
and, when node and `npm ci` are there, the npm reference server-memory (2025-11-25). Targets:
gateway median <= 1.8 x direct; gateway - bare proxy <= 1.5 x the run.call median; with the node
upstream, bare proxy <= 1.6 x direct; p99 reported.

    python bench/bench_gateway.py [--quick] [--calls N]
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a file: make `bench` importable, and not bench/ itself
    sys.path[0] = str(Path(__file__).resolve().parent.parent)

import argparse
import json
import os
import shlex
import shutil
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import anyio

from bench.common import ROOT, Result, median, ms, note, percentile, print_table, temp_dir

MEDIAN_TARGET = 1.8
JOURNAL_TARGET = 1.5  # (gateway - bare proxy) / run.call
HOP_TARGET = 1.6  # bare proxy / direct, with the node upstream
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


async def bare_proxy(upstream: Any) -> Any:
    """The second hop alone, as an SDK server over the SDK client `upstream`: it lists the upstream's
    tools and forwards each tools/call as it is, journaling nothing."""
    from mcp import types
    from mcp.server import Server
    from pydantic import TypeAdapter

    from reversi.mcp_results import exact_results, passed_through

    raw: Any = TypeAdapter(dict[str, Any])
    tools = (await upstream.list_tools()).tools
    schemas = {tool.name: tool.input_schema for tool in tools}

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> Any:
        forward = types.CallToolRequestParams(name=params.name, arguments=params.arguments)
        answer = await upstream.session.send_request(types.CallToolRequest(params=forward), raw)
        return passed_through("tools/call", answer)  # as the gateway answers: translated for the agent

    server = Server("bare-proxy", on_list_tools=list_tools, on_call_tool=call_tool, get_tool_input_schema=schemas.get)
    server.middleware = [exact_results(lambda: server.server_info_stamp)]
    return server


def serve_bare_proxy(upstream_argv: list[str]) -> None:
    """The bare proxy on the gateway's stdio transport."""
    from mcp import Client, StdioServerParameters

    from reversi.gateway.stdio import agent_stdio

    upstream_params = StdioServerParameters(command=upstream_argv[0], args=upstream_argv[1:], env=dict(os.environ))

    async def main() -> None:
        async with Client(upstream_params, cache=None) as upstream:
            server = await bare_proxy(upstream)
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


async def _paced(pace: Callable[[int], Awaitable[Any]], call: Callable[[int], Awaitable[Any]], start: int,
                 count: int) -> list[float]:
    """`call` timed as `_timed` does, each one after an untimed `pace`."""
    samples = []
    clock = time.perf_counter
    for i in range(start, start + count):
        await pace(i)
        t0 = clock()
        await call(i)
        samples.append(clock() - t0)
    return samples


SIDES = ("direct", "bare proxy", "gateway", "run.call", "run.call paced")
BATCH = 20


@dataclass(frozen=True)
class Upstream:
    """What the sides call: a server's command line, one of its tools and that tool's arguments."""

    name: str
    argv: list[str]
    tool: str
    arguments: Callable[[int], dict[str, Any]]


def upstreams(directory: Path) -> list[Upstream]:
    """The Python upstream, and server-memory when node and its package are installed."""
    python = Upstream("python upstream", [sys.executable, str(Path(__file__).resolve()), "--serve-upstream"], TOOL,
                      lambda i: {"sku": "sku-4711", "qty": i % 7 + 1})
    node = shutil.which("node")
    memory = ROOT / "node_modules" / "@modelcontextprotocol" / "server-memory" / "dist" / "index.js"
    if node is None or not memory.exists():
        note("gateway: no node or no node_modules (npm ci): the server-memory upstream is left out")
        return [python]
    os.environ["MEMORY_FILE_PATH"] = str(directory / "memory.jsonl")
    return [python, Upstream("node server-memory", [node, str(memory)], "search_nodes",
                             lambda i: {"query": f"q{i % 7}"})]


async def measure(upstream: Upstream, calls: int, batch: int, warmup: int, directory: Path) -> dict[str, list[float]]:
    from mcp import Client, StdioServerParameters

    import reversi

    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    manifest = directory / "tools.yaml"
    manifest.write_text(MANIFEST)
    db = f"sqlite:///{directory}/reversi.db"
    gateway_args = [
        "-m", "reversi.gateway",
        "--upstream", f"up={shlex.join(upstream.argv)}",
        "--db", db,
        "-m", str(manifest),
    ]
    me = str(Path(__file__).resolve())
    direct_params = StdioServerParameters(command=upstream.argv[0], args=upstream.argv[1:], env=env)
    bare_params = StdioServerParameters(
        command=sys.executable, args=[me, "--serve-bare-proxy", json.dumps(upstream.argv)], env=env
    )
    gateway_params = StdioServerParameters(command=sys.executable, args=gateway_args, env=env, cwd=str(directory))
    async with (
        Client(direct_params, cache=None) as direct,
        Client(bare_params, cache=None) as bare,
        Client(gateway_params, cache=None) as gateway,
    ):
        def caller(client: Client) -> Callable[[int], Awaitable[Any]]:
            async def call(i: int) -> Any:
                result = await client.call_tool(upstream.tool, upstream.arguments(i))
                assert not result.is_error, result
                return result

            return call

        with reversi.open(db, manifests=[str(manifest)]) as ledger:
            run = ledger.start_run(actor="bench")

            async def journaled(i: int) -> Any:  # the same store, the same tool and arguments
                return run.call(upstream.tool, upstream.arguments(i), lambda **args: {"ok": True})

            sides = {"direct": caller(direct), "bare proxy": caller(bare), "gateway": caller(gateway),
                     "run.call": journaled}
            for call in sides.values():
                await _timed(call, 0, warmup)
            samples: dict[str, list[float]] = {side: [] for side in SIDES}
            for r in range(calls // batch):
                for side in SIDES if r % 2 == 0 else SIDES[::-1]:
                    start = warmup + r * batch
                    if side == "run.call paced":
                        samples[side] += await _paced(sides["direct"], journaled, start, batch)
                    else:
                        samples[side] += await _timed(sides[side], start, batch)
    note(f"gateway, {upstream.name}: {calls} calls each side in alternating batches of {batch} "
         f"(after {warmup} warm-up calls)")
    return samples


def _results(upstream: Upstream, count: int, samples: dict[str, list[float]]) -> list[Result]:
    direct, bare, gateway, journal, paced = (samples[side] for side in SIDES)
    ratio = median(gateway) / median(direct)
    added = median(gateway) - median(bare)
    hop = median(bare) / median(direct)
    name = f"gateway ({upstream.name})"
    node = upstream.name.startswith("node")
    return [
        Result(name, f"tools/call median, stdio, durable journal ({count} calls)", ms(median(gateway)),
               ms(median(direct)), ratio, f"<= {MEDIAN_TARGET}x", ratio <= MEDIAN_TARGET),
        Result(name, "tools/call p99", ms(percentile(gateway, 0.99)), ms(percentile(direct, 0.99)),
               percentile(gateway, 0.99) / percentile(direct, 0.99)),
        Result(name, "overhead per call (median difference)", ms(median(gateway) - median(direct))),
        Result(name, "bare proxy, no journal: the second hop alone", ms(median(bare)), ms(median(direct)), hop,
               f"<= {HOP_TARGET}x" if node else "", (hop <= HOP_TARGET) if node else None),
        Result(name, "what the journal adds (gateway - bare proxy) vs run.call", ms(added), ms(median(journal)),
               added / median(journal), f"<= {JOURNAL_TARGET}x", added <= JOURNAL_TARGET * median(journal)),
        Result(name, "the same vs run.call at a forwarded call's pace (after a direct call each)", ms(added),
               ms(median(paced)), added / median(paced)),
    ]


def bench(quick: bool = False, calls: int | None = None) -> list[Result]:
    count = calls or (200 if quick else 1000)
    results: list[Result] = []
    with temp_dir("gateway") as directory:
        for upstream in upstreams(directory):
            samples = anyio.run(measure, upstream, count, min(BATCH, count), 20 if quick else 50, directory)
            results += _results(upstream, count, samples)
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer calls, for a smoke test")
    parser.add_argument("--calls", type=int, help="calls per side (default 1000)")
    parser.add_argument("--serve-upstream", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--serve-bare-proxy", metavar="UPSTREAM_ARGV_JSON", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve_upstream:
        serve_upstream()
        return 0
    if args.serve_bare_proxy:
        serve_bare_proxy(json.loads(args.serve_bare_proxy))
        return 0
    print_table(bench(args.quick, args.calls))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
