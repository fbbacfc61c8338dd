"""The gateway over HTTP as a raw client sees it: `reversi-gateway --http` in a subprocess, and
stateless (2026-07-28) JSON-RPC requests built by hand, so a test sees every status and byte."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path
from typing import Any

from tests.gateway.conftest import GATEWAY
from tests.server.conftest import LoggedProcess

REVISION = "2026-07-28"
ENVELOPE = {"io.modelcontextprotocol/protocolVersion": REVISION, "io.modelcontextprotocol/clientCapabilities": {}}
NAMED = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}


def mcp_request(method: str, params: Any = None, *, request_id: Any = 1) -> tuple[dict[str, str], dict[str, Any]]:
    """The headers and body of one stateless request; `params` (a dict) gets the protocol's envelope."""
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json",
               "MCP-Protocol-Version": REVISION, "Mcp-Method": method}
    if isinstance(params, dict):
        params = {**params, "_meta": {**ENVELOPE, **(params.get("_meta") or {})}}
        named = params.get(NAMED.get(method, ""))
        if isinstance(named, str) and named.isascii() and named.isprintable():
            headers["Mcp-Name"] = named
    body: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        body["params"] = params
    return headers, body


class GatewayProcess(LoggedProcess):
    """`reversi-gateway --http 127.0.0.1:0 ARGS`."""

    def __init__(self, args: list[str], log: Path, env: dict[str, str] | None = None) -> None:
        proc = subprocess.Popen([str(GATEWAY), "--http", "127.0.0.1:0", *args], env={**os.environ, **(env or {})},
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        super().__init__("the gateway", proc, log)
        line = self.expect("reversi-gateway: serving ")
        self.url = line.split("serving ", 1)[1].split("/mcp", 1)[0]

    def stop(self) -> None:
        self.signal(signal.SIGTERM)


def answer_of(text: str) -> Any:
    """The JSON-RPC answer in a response body (JSON, or the data of an SSE event)."""
    text = text.strip()
    if text.startswith("{") or text.startswith("["):
        return json.loads(text)
    data = [line[5:].strip() for line in text.splitlines() if line.startswith("data:")]
    return json.loads(data[-1]) if data else None
