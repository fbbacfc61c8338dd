"""The gateway over HTTP as a raw client sees it: `reversi-gateway --http` in a subprocess, and
stateless (2026-07-28) JSON-RPC requests built by hand, so a test sees every status and byte."""

from __future__ import annotations

import json
import queue
import re
import subprocess
import threading
from pathlib import Path
from typing import Any

import pytest
from tests.gateway.conftest import GATEWAY, WAIT_S

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


class GatewayProcess:
    """`reversi-gateway --http 127.0.0.1:0 ARGS`; what it says on stderr is kept in `log`."""

    def __init__(self, args: list[str], log: Path, env: dict[str, str] | None = None) -> None:
        self.log = log
        self.proc = subprocess.Popen([str(GATEWAY), "--http", "127.0.0.1:0", *args], stderr=subprocess.PIPE,
                                     stdout=subprocess.DEVNULL, text=True, env=env)
        self._lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()
        said = []
        while True:
            try:
                line = self._lines.get(timeout=WAIT_S)
            except queue.Empty:
                pytest.fail(f"the gateway did not start in {WAIT_S:g} s: {''.join(said)}")
            if line is None:
                pytest.fail(f"the gateway ended at start: {''.join(said)}")
            said.append(line)
            found = re.search(r"serving (http://\S+)/mcp", line)
            if found:
                self.url = found.group(1)
                return

    def _pump(self) -> None:
        assert self.proc.stderr is not None
        with self.log.open("a") as out:
            for line in self.proc.stderr:
                out.write(line)
                out.flush()
                self._lines.put(line)
        self._lines.put(None)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
        self.proc.wait(WAIT_S)


def answer_of(text: str) -> Any:
    """The JSON-RPC answer in a response body (JSON, or the data of an SSE event)."""
    text = text.strip()
    if text.startswith("{") or text.startswith("["):
        return json.loads(text)
    data = [line[5:].strip() for line in text.splitlines() if line.startswith("data:")]
    return json.loads(data[-1]) if data else None
