"""The gateway over HTTP under load: 32 MCP clients at once through `reversi-gateway --http`, journaling
every call in PostgreSQL, beside a bare proxy built the same way that journals nothing.

The bare proxy is the SDK's server on the SDK's streamable-HTTP transport (JSON answers, as the
gateway's), forwarding each tools/call to the upstream with the SDK's client: the two hops without the
journal. Both sides call the same upstream (bench_gateway.py's, one per side) from the same clients:
the official MCP client, 32 sessions spread over 4 processes, each calling as fast as it is answered
for a fixed window, each session's calls in a run of its own (`Reversi-Run-Id`). Windows of the two
sides alternate. Target: gateway >= 0.5 x the bare proxy.

    python bench/bench_gateway_http.py [--quick] [--seconds S]
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a file: make `bench` importable, and not bench/ itself
    sys.path[0] = str(Path(__file__).resolve().parent.parent)

import argparse
import os
import re
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import anyio

from bench.bench_gateway import MANIFEST, TOOL, bare_proxy
from bench.common import (
    ROOT,
    Result,
    note,
    pg_schemas,
    pg_unreachable,
    pg_url,
    print_table,
    rate,
    rate_of_processes,
    temp_dir,
)

CLIENTS = 32
CLIENT_PROCESSES = 4
TARGET = 0.5
UPSTREAM = [sys.executable, str(ROOT / "bench" / "bench_gateway.py"), "--serve-upstream"]
ENV = {**os.environ, "PYTHONPATH": str(ROOT / "src")}


def serve_bare_proxy() -> None:
    """The bare proxy of bench_gateway.py on the SDK's streamable-HTTP transport, with JSON answers as the
    gateway's."""
    import uvicorn
    from mcp import Client, StdioServerParameters
    from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
    from starlette.applications import Starlette
    from starlette.routing import Route

    async def main() -> None:
        params = StdioServerParameters(command=UPSTREAM[0], args=UPSTREAM[1:], env=ENV)
        async with Client(params, cache=None) as upstream:
            manager = StreamableHTTPSessionManager(app=await bare_proxy(upstream), json_response=True)
            app = Starlette(routes=[Route("/mcp", endpoint=StreamableHTTPASGIApp(manager))])
            web = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"))
            async with manager.run(), anyio.create_task_group() as tg:
                tg.start_soon(web.serve)
                while not web.started:
                    await anyio.sleep(0.01)
                port = web.servers[0].sockets[0].getsockname()[1]
                print(f"serving http://127.0.0.1:{port}/mcp", file=sys.stderr, flush=True)

    anyio.run(main, backend_options={"use_uvloop": True})


def client(url: str, sessions: int, seconds: float) -> None:
    """`sessions` MCP sessions to `url`; say `ready`, wait for `go`, call for `seconds`, say `done N S`."""
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    async def main() -> None:
        go = anyio.Event()
        counts = [0] * sessions
        opened = 0

        async def session(i: int) -> None:
            nonlocal opened
            headers = {"Reversi-Run-Id": f"run_bench_{os.getpid()}_{i}"}  # an agent's calls go to its run
            async with (
                httpx2.AsyncClient(timeout=60, headers=headers) as http,
                Client(streamable_http_client(url, http_client=http), cache=None) as mcp,
            ):
                await mcp.call_tool(TOOL, {"sku": "warm-up", "qty": 1})
                opened += 1
                await go.wait()
                deadline = time.perf_counter() + seconds
                while time.perf_counter() < deadline:
                    result = await mcp.call_tool(TOOL, {"sku": f"sku-{i}", "qty": counts[i] % 7 + 1})
                    assert not result.is_error, result
                    counts[i] += 1

        async with anyio.create_task_group() as tg:
            for i in range(sessions):
                tg.start_soon(session, i)
            while opened < sessions:
                await anyio.sleep(0.01)
            print("ready", flush=True)
            await anyio.to_thread.run_sync(sys.stdin.readline)
            started = time.perf_counter()
            go.set()
        print(f"done {sum(counts)} {time.perf_counter() - started}", flush=True)

    anyio.run(main)


@contextmanager
def serving(argv: list[str], cwd: Path) -> Iterator[str]:
    """A server process; yields the URL it says it serves."""
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True, env=ENV, cwd=cwd)
    try:
        assert proc.stderr is not None
        for line in proc.stderr:
            found = re.search(r"serving (http://\S+/mcp)", line)
            if found:
                threading.Thread(target=proc.stderr.read, daemon=True).start()  # never let it block on a full pipe
                yield found.group(1)
                return
        raise RuntimeError(f"{argv[:3]} did not start")
    finally:
        proc.terminate()
        proc.wait(30)


def window(url: str, seconds: float) -> float:
    """Calls per second from CLIENTS sessions over CLIENT_PROCESSES processes, started together."""
    argv = [sys.executable, str(Path(__file__).resolve()), "--client", url, str(CLIENTS // CLIENT_PROCESSES),
            str(seconds)]
    return rate_of_processes([argv] * CLIENT_PROCESSES, ENV)


def bench(quick: bool = False, seconds: float | None = None) -> list[Result]:
    url = pg_url()
    why = pg_unreachable(url)
    name = "gateway over HTTP"
    if why is not None:
        note(f"{name}: skipped, PostgreSQL unreachable ({why})")
        return [Result(name, "skipped", f"PostgreSQL unreachable: {why}")]
    assert url is not None
    seconds = seconds or (2.0 if quick else 5.0)
    rounds = 1 if quick else 2
    got: dict[str, list[float]] = {"gateway": [], "bare proxy": []}
    with temp_dir("gateway-http") as directory, pg_schemas(url, "ledger") as [(_, ledger_url)]:
        manifest = directory / "tools.yaml"
        manifest.write_text(MANIFEST)
        gateway = [sys.executable, "-m", "reversi.gateway", "--http", "127.0.0.1:0", "--db", ledger_url,
                   "-m", str(manifest), "--upstream", "up=" + " ".join(UPSTREAM)]
        bare = [sys.executable, str(Path(__file__).resolve()), "--serve-bare-proxy"]
        with serving(gateway, directory) as gateway_url, serving(bare, directory) as bare_url:
            for r in range(rounds):
                for side in ("gateway", "bare proxy") if r % 2 == 0 else ("bare proxy", "gateway"):
                    got[side].append(window(gateway_url if side == "gateway" else bare_url, seconds))
                    note(f"{name}: {side}: {got[side][-1]:,.0f} calls/s")
    best = {side: max(v) for side, v in got.items()}
    share = best["gateway"] / best["bare proxy"]
    note(f"{name}: best of {rounds} window(s) of {seconds:g} s per side")
    return [Result(name, f"tools/call, {CLIENTS} concurrent MCP clients, journal in PostgreSQL",
                   rate(best["gateway"], "calls"), rate(best["bare proxy"], "calls"), 1 / share,
                   f">= {TARGET} x bare proxy", share >= TARGET)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="shorter windows, one round")
    parser.add_argument("--seconds", type=float, help="seconds per window (default 5)")
    parser.add_argument("--serve-bare-proxy", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--client", nargs=3, metavar=("URL", "SESSIONS", "SECONDS"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve_bare_proxy:
        serve_bare_proxy()
        return 0
    if args.client:
        url, sessions, seconds = args.client
        client(url, int(sessions), float(seconds))
        return 0
    print_table(bench(args.quick, args.seconds))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
