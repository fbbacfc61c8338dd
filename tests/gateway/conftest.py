"""Gateway fixtures: the test upstream (stdio or HTTP), the gateway as a subprocess driven by the
official MCP client, and ways to read what the upstream saw."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, TextIO, cast

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

GATEWAY = Path(sys.executable).parent / "reversi-gateway"
UPSTREAM = Path(__file__).parent / "upstream_server.py"
WAIT_S = 30.0


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def until(predicate: Callable[[], Any], what: str, timeout: float = WAIT_S) -> Any:
    """Wait for `predicate()` to be truthy (an event another process makes happen); fail after `timeout`."""
    with anyio.move_on_after(timeout):
        while not (value := predicate()):
            await anyio.sleep(0.01)
        return value
    pytest.fail(f"timed out waiting for {what}")


@dataclass
class Shop:
    """One test upstream's state directory and the flag that runs it."""

    name: str
    state: Path

    def flag(self) -> str:
        return f"{self.name}={shlex.join([sys.executable, str(UPSTREAM), str(self.state)])}"

    def calls(self, tool: str | None = None) -> list[dict[str, Any]]:
        path = self.state / "calls.jsonl"
        found = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
        return [c for c in found if tool is None or c["tool"] == tool]

    def orders(self) -> dict[str, Any]:
        path = self.state / "orders.json"
        return json.loads(path.read_text()) if path.exists() else {}

    def started(self, key: str) -> int | None:
        path = self.state / f"started-{key}"
        return int(path.read_text()) if path.exists() and path.read_text() else None

    def release(self, key: str) -> None:
        (self.state / f"release-{key}").write_text("go")


@pytest.fixture
def shop(tmp_path: Path) -> Shop:
    return Shop("shop", tmp_path / "shop")


@pytest.fixture
def shops(tmp_path: Path) -> Callable[[str], Shop]:
    return lambda name: Shop(name, tmp_path / name)


@asynccontextmanager
async def gateway(
    *args: str, env: dict[str, str] | None = None, mode: str = "auto", errlog: IO[str] = sys.stderr
) -> AsyncIterator[Client]:
    """The gateway on stdio (`args` are its flags), connected with the official MCP client; what it
    says on stderr goes to `errlog`."""
    params = StdioServerParameters(
        command=str(GATEWAY), args=list(args), env={**os.environ, **(env or {})}, cwd=os.getcwd()
    )
    async with Client(stdio_client(params, errlog=cast(TextIO, errlog)), cache=None, mode=mode) as client:
        yield client


@asynccontextmanager
async def direct(shop: Shop) -> AsyncIterator[Client]:
    """The same upstream with no gateway in between."""
    argv = shlex.split(shop.flag().partition("=")[2])
    async with Client(StdioServerParameters(command=argv[0], args=argv[1:]), cache=None) as client:
        yield client


@pytest.fixture
def http_shop(tmp_path: Path) -> Iterator[tuple[Shop, str]]:
    """The test upstream over streamable HTTP: (its state, its URL)."""
    shop = Shop("web", tmp_path / "web")
    proc = subprocess.Popen(
        [sys.executable, str(UPSTREAM), str(shop.state), "--http"], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        port = proc.stdout.readline().strip()
        assert port.isdigit(), "the HTTP upstream did not start"
        yield shop, f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.kill()
        proc.wait(WAIT_S)


SHOP_MANIFEST = """\
version: 1
tools:
  create_order:
    idempotency:
      key: ["$args.order_id"]
    compensation:
      tool: cancel_order
      args: {order_id: "$args.order_id"}
      kind: inverse
    verification:
      tool: get_order
      args: {order_id: "$args.order_id"}
      expect: {status: canceled}
  get_order:
    effect: read
  echo:
    effect: read
  env:
    effect: read
    requires_approval: true
"""


@pytest.fixture
def shop_manifest(tmp_path: Path) -> str:
    path = tmp_path / "shop.yaml"
    path.write_text(SHOP_MANIFEST)
    return str(path)


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Callable[..., str]]:
    """Start `reversi-gateway --http 127.0.0.1:0 ARGS...`; returns its base URL."""
    procs: list[subprocess.Popen[str]] = []

    def start(*args: str) -> str:
        proc = subprocess.Popen([str(GATEWAY), "--http", "127.0.0.1:0", *args], stderr=subprocess.PIPE, text=True)
        procs.append(proc)
        assert proc.stderr is not None
        said = []
        for line in proc.stderr:
            said.append(line)
            found = re.search(r"serving (http://\S+)/mcp", line)
            if found:
                return found.group(1)
        pytest.fail(f"the gateway did not start: {''.join(said)}")

    yield start
    for proc in procs:
        proc.terminate()
        proc.wait(WAIT_S)
