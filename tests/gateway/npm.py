"""The npm reference MCP servers and the two SDKs' clients, for tests that drive the gateway in front
of servers nobody here wrote and compare what an agent sees with the same calls made directly.

The servers and the TypeScript SDK are pinned by the repository's package-lock.json (`make test`
runs `npm ci`); the tests that need them skip only when `node` is not installed."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import socket
import subprocess
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client, StdioServerParameters, types
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from pydantic import TypeAdapter
from tests.gateway.conftest import GATEWAY, WAIT_S

NODE = shutil.which("node")
ROOT = Path(__file__).resolve().parents[2]
TS_CLIENT = Path(__file__).parent / "ts_client.mjs"
needs_node = pytest.mark.skipif(
    NODE is None, reason="node is not installed: these tests drive the npm reference MCP servers"
)
RAW: Any = TypeAdapter(dict[str, Any])
# What only the 2026-07-28 revision has in a result: the gateway adds it for a 2026 agent.
MODERN_ONLY = ("resultType", "ttlMs", "cacheScope")
ENVELOPE = "io.modelcontextprotocol/"
SAMPLED = "sampled by the python agent"


def server(name: str, *args: str) -> list[str]:
    """The command line of `@modelcontextprotocol/server-NAME` with `args`."""
    path = ROOT / "node_modules" / "@modelcontextprotocol" / f"server-{name}" / "dist" / "index.js"
    if not path.exists():
        pytest.fail(f"{path} is missing: run `npm ci` in {ROOT} (`make test` does)")
    assert NODE is not None
    return [NODE, str(path), *args]


def untranslated(answer: dict[str, Any]) -> dict[str, Any]:
    """An answer less what a 2026 revision adds to a 2025 server's result (the fields, the envelope)."""
    result = answer.get("result")
    if not isinstance(result, dict):
        return answer
    kept = {k: v for k, v in result.items() if k not in MODERN_ONLY}
    meta = {k: v for k, v in (kept.pop("_meta", None) or {}).items() if not k.startswith(ENVELOPE)}
    return {"result": kept | ({"_meta": meta} if meta else {})}


class PythonAgent:
    """The Python SDK's client, answering the server's own requests as a client with every
    capability would, and keeping what it was asked."""

    def __init__(self, roots: Sequence[str] = ()) -> None:
        self.roots = list(roots)
        self.asked: list[str] = []
        self.progress: list[tuple[float, float | None, str | None]] = []

    def callbacks(self) -> dict[str, Any]:
        async def sampling(ctx: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
            self.asked.append("sampling/createMessage")
            return types.CreateMessageResult(role="assistant", content=types.TextContent(text=SAMPLED), model="py")

        async def elicitation(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
            self.asked.append("elicitation/create")
            return types.ElicitResult(action="decline")

        async def roots(ctx: Any) -> types.ListRootsResult:
            self.asked.append("roots/list")
            return types.ListRootsResult(roots=[types.Root(uri=uri, name="root") for uri in self.roots])  # type: ignore[arg-type]

        return {"sampling_callback": sampling, "elicitation_callback": elicitation, "list_roots_callback": roots}

    async def on_progress(self, progress: float, total: float | None, message: str | None) -> None:
        self.progress.append((progress, total, message))

    @asynccontextmanager
    async def stdio(
        self, command: Sequence[str], mode: str, env: dict[str, str] | None = None
    ) -> AsyncIterator[Client]:
        params = StdioServerParameters(
            command=command[0], args=list(command[1:]), env={**os.environ, **(env or {})}, cwd=os.getcwd()
        )
        async with Client(stdio_client(params), cache=None, mode=mode, **self.callbacks()) as client:
            yield client

    @asynccontextmanager
    async def http(self, url: str, mode: str) -> AsyncIterator[Client]:
        async with (
            httpx2.AsyncClient(timeout=WAIT_S) as http,
            Client(streamable_http_client(url, http_client=http), cache=None, mode=mode, **self.callbacks()) as client,
        ):
            yield client


async def answers(client: Client, requests: Sequence[Any], progress: Any = None) -> list[dict[str, Any]]:
    """Each request's raw result (`{"result": ...}`) or error (`{"error": {code, message, data}}`)."""
    out: list[dict[str, Any]] = []
    for request in requests:
        try:
            out.append({"result": await client.session.send_request(request, RAW, progress_callback=progress)})
        except MCPError as exc:
            out.append({"error": {"code": exc.code, "message": exc.message, "data": exc.data}})
    return out


def through(command: Sequence[str], db: str, *more: str) -> list[str]:
    """The gateway's command line in front of `command`."""
    return [str(GATEWAY), "--upstream", f"up={shlex.join(command)}", "--db", db, *more]


def ts_agent(
    target: str | Sequence[str],
    requests: Sequence[tuple[str, dict[str, Any]]],
    root: str = "",
    env: dict[str, str] | None = None,
) -> Any:
    """Run the TypeScript SDK's client (`ts_client.mjs`) against `target` (a URL or a command line,
    started with `env` added to ours)."""
    assert NODE is not None
    where = target if isinstance(target, str) else json.dumps(list(target))
    done = subprocess.run(
        [NODE, str(TS_CLIENT), where, json.dumps(requests), root],
        capture_output=True, text=True, timeout=WAIT_S * 2, cwd=ROOT, check=False, env={**os.environ, **(env or {})},
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def everything_over_http() -> Iterator[str]:
    """server-everything serving streamable HTTP; yields its URL."""
    port = free_port()
    proc = subprocess.Popen(
        server("everything", "streamableHttp"), env={**os.environ, "PORT": str(port)},
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )
    try:
        assert proc.stderr is not None
        for line in proc.stderr:
            if "listening on port" in line:
                break
        else:
            pytest.fail("server-everything did not start over HTTP")
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.kill()
        proc.wait(WAIT_S)


async def wait_for(check: Any, what: str) -> Any:
    """Await `check()` until it returns something truthy (an upstream acting on its own)."""
    with anyio.move_on_after(WAIT_S):
        while not (value := await check()):
            await anyio.sleep(0.05)
        return value
    pytest.fail(f"timed out waiting for {what}")
