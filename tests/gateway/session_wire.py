"""Handshake (MCP 2025) sessions on `reversi-gateway --http` as a raw client opens and uses them, with
keys of two agents and two operators, and the count of sessions the gateway holds anything for (its
`/metrics`)."""

from __future__ import annotations

import json
import socket
from dataclasses import dataclass
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

import reversi
from reversi.engine.keys import create_key

HANDSHAKE = "2025-11-25"
ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
ENDPOINT_ROLES = {"/mcp": "agent", "/operator/mcp": "operator"}


@dataclass(frozen=True)
class Keys:
    """Two keys for each endpoint: (the owner's, another principal's)."""

    by_endpoint: dict[str, tuple[str, str]]

    def of(self, endpoint: str) -> tuple[str, str]:
        return self.by_endpoint[endpoint]


def make_keys(db: str) -> Keys:
    """Agents alice and bob (for `/mcp`), operators ops and ops2 (for `/operator/mcp`)."""
    with reversi.open(db) as ledger:
        made = {name: create_key(ledger.store, name, role)[1]
                for name, role in (("alice", "agent"), ("bob", "agent"), ("ops", "operator"), ("ops2", "operator"))}
    return Keys({"/mcp": (made["alice"], made["bob"]), "/operator/mcp": (made["ops"], made["ops2"])})


def headers(key: str | None, session: str | None = None, **more: str) -> dict[str, str]:
    """A handshake request's headers, with `key` as its Bearer key and `session` as its session."""
    found = {**ACCEPT, "MCP-Protocol-Version": HANDSHAKE, **more}
    if key is not None:
        found["Authorization"] = f"Bearer {key}"
    if session is not None:
        found["Mcp-Session-Id"] = session
    return found


def open_session(http: httpx.Client, url: str, key: str) -> str:
    """A new handshake session at `url` (initialized), opened with `key`; its id."""
    hello = {"protocolVersion": HANDSHAKE, "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}
    answer = http.post(url, headers={**ACCEPT, "Authorization": f"Bearer {key}"},
                       json={"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": hello})
    assert answer.status_code == 200, answer.text
    session = answer.headers["mcp-session-id"]
    done = http.post(url, headers=headers(key, session), json={"jsonrpc": "2.0", "method": "notifications/initialized"})
    assert done.status_code == 202, done.text
    return session


def tool_call(name: str, arguments: dict[str, Any], request_id: int = 1) -> dict[str, Any]:
    params = {"name": name, "arguments": arguments}
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


# What each endpoint is asked in a session: a call the agents' endpoint journals, a listing of runs.
CALLS = {"/mcp": lambda text: tool_call("echo", {"text": text}),
         "/operator/mcp": lambda text: tool_call("reversi.list_runs", {})}


def gauge(base: str, name: str = "reversi_gateway_sessions") -> dict[str, float]:
    """The samples of metric `name` at `base`/metrics, by their `endpoint` label."""
    text = httpx.get(f"{base}/metrics").text
    return {s.labels.get("endpoint", ""): s.value
            for family in text_string_to_metric_families(text) for s in family.samples if s.name == name}


def cut_off(base: str, path: str, head: dict[str, str], body: bytes, sent: int, *, answered: bool) -> bytes:
    """POST `body` to `path` over a raw socket and hang up after `sent` bytes of it; when `answered`,
    first read the answer the gateway gives to the part it has (a 401 comes before the body)."""
    host, port = base.removeprefix("http://").rsplit(":", 1)
    lines = [f"POST {path} HTTP/1.1", f"Host: {host}:{port}", f"Content-Length: {len(body)}",
             *(f"{k}: {v}" for k, v in head.items())]
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode() + body[:sent])
        return sock.recv(65536) if answered else b""


def json_body(message: dict[str, Any]) -> bytes:
    return json.dumps(message).encode()
