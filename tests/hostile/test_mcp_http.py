"""Hostile requests at the gateway's HTTP endpoints, `/mcp` (agents) and `/operator/mcp` (operators):
bodies of every shape, headers that disagree with them or with the protocol, other methods and
paths. No answer is a 5xx or an internal JSON-RPC error, the gateway keeps serving and prints no
traceback, nothing reaches the upstream unjournaled, and an operator's request that is refused
leaves the store as it was."""

from __future__ import annotations

import json
import string
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests.gateway.http_wire import GatewayProcess, answer_of, mcp_request
from tests.hostile.fuzz import fuzz_settings, tried
from tests.hostile.mcp_messages import MESSAGES, gateway_flags, journal_problems, operator_calls
from tests.hostile.store_state import store_state

INTERNAL_ERROR = -32603
RUN_ID = "run_fuzz_http"
HEADER_TEXT = st.text(alphabet=string.printable.strip("\r\n\x0b\x0c"), max_size=40).map(str.strip)
HEADERS = st.dictionaries(st.sampled_from(["Accept", "Content-Type", "MCP-Protocol-Version", "Mcp-Method", "Mcp-Name",
                                           "Mcp-Session-Id", "Reversi-Run-Id", "Origin", "Host", "Authorization",
                                           "Content-Encoding"]), HEADER_TEXT, max_size=3)


class HttpGateway:
    """`reversi-gateway --http` over a SQLite store with no keys (loopback clients act as the admin)."""

    def __init__(self, tmp_path: Path) -> None:
        self.shop, self.db, flags = gateway_flags(tmp_path)
        self.log = tmp_path / "gateway.log"
        self.process = GatewayProcess(flags, self.log)
        self.client = httpx.Client(base_url=self.process.url, timeout=60)

    def send(self, path: str, body: bytes, headers: dict[str, str], method: str = "POST") -> httpx.Response:
        answer = self.client.request(method, path, content=body, headers=headers)
        assert answer.status_code < 500, (path, body[:300], headers, answer.status_code, answer.text[:500])
        if answer.headers.get("content-type", "").startswith(("application/json", "text/event-stream")):
            message = answer_of(answer.text)
            if isinstance(message, dict):
                assert (message.get("error") or {}).get("code") != INTERNAL_ERROR, (body[:300], message)
        return answer

    def call(self, path: str, message: dict[str, Any], run_id: str = RUN_ID) -> httpx.Response:
        headers, _ = mcp_request(message["method"], message.get("params"))
        return self.send(path, json.dumps(message).encode(), {**headers, "Reversi-Run-Id": run_id})

    def still_serving(self) -> None:
        headers, body = mcp_request("tools/call", {"name": "echo", "arguments": {"text": "still"}})
        answer = self.client.post("/mcp", json=body, headers={**headers, "Reversi-Run-Id": RUN_ID})
        assert answer_of(answer.text)["result"]["content"][0]["text"] == "still", answer.text

    def close(self) -> None:
        self.client.close()
        self.process.stop()


@pytest.fixture
def http_gateway(tmp_path: Path) -> Iterator[HttpGateway]:
    gateway = HttpGateway(tmp_path)
    try:
        gateway.still_serving()
        yield gateway
    finally:
        gateway.close()
    assert "Traceback" not in gateway.log.read_text()
    assert journal_problems(gateway.shop, gateway.db) == []


@fuzz_settings(ci=60)
@given(body=MESSAGES, headers=HEADERS, base=st.sampled_from(["tools/call", "tools/list", "ping", "prompts/get"]),
       path=st.sampled_from(["/mcp", "/mcp", "/mcp", "/operator/mcp", "/mcp/", "/MCP", "/operator", "/healthz"]),
       method=st.sampled_from(["POST", "POST", "POST", "GET", "DELETE", "PUT"]))
def test_hostile_requests_get_4xx_or_an_mcp_error_and_the_gateway_serves_on(
    http_gateway: HttpGateway, body: bytes, headers: dict[str, str], base: str, path: str, method: str
) -> None:
    valid, _ = mcp_request(base, {})
    http_gateway.send(path, body, {**valid, "Reversi-Run-Id": RUN_ID, **headers}, method)
    tried("mcp-http")
    http_gateway.still_serving()
    assert journal_problems(http_gateway.shop, http_gateway.db) == []


@fuzz_settings(ci=40)
@given(message=operator_calls([RUN_ID]), journaled=st.booleans())
def test_a_refused_operator_request_changes_nothing(
    http_gateway: HttpGateway, message: dict[str, Any], journaled: bool
) -> None:
    if journaled:  # a step to undo, resolve or plan, made through the agents' endpoint
        headers, body = mcp_request("tools/call", {"name": "create_order", "arguments": {"order_id": "o1"}})
        http_gateway.send("/mcp", json.dumps(body).encode(), {**headers, "Reversi-Run-Id": RUN_ID})
    before = store_state(http_gateway.db)
    answer = http_gateway.call("/operator/mcp", message)
    tried("mcp-http")
    reply = answer_of(answer.text) if answer.status_code == 200 else None
    refused = not isinstance(reply, dict) or "error" in reply or reply["result"].get("isError")
    if refused:
        assert store_state(http_gateway.db) == before, (message, answer.text[:500])
    assert journal_problems(http_gateway.shop, http_gateway.db) == []
